/* Tests of autograd: every differentiable op against central finite
 * differences in float64 (eps 1e-6), broadcasting and views, accumulation,
 * retain_graph, the error paths, version counters, graph memory, no_grad and
 * custom nodes. */
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

/* ---- helpers ---- */

static uint64_t lcg_state = 12345;
static double uniform01(void) {
  lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(lcg_state >> 11) / (double)(1ULL << 53);
}

/* How input values are drawn: magnitudes in [lo, hi], with a random sign
 * when signed_ (keeps values away from kinks at 0). */
typedef struct value_range {
  double lo, hi;
  bool signed_;
} value_range;

static const value_range ANY = {-1.0, 1.0, false};
static const value_range POSITIVE = {0.5, 2.0, false};
static const value_range AWAY_FROM_ZERO = {0.2, 1.0, true};

static lt_tensor *random_tensor(const int64_t *shape, int ndim, value_range r, bool grad) {
  lt_tensor *t = NULL;
  if (lt_empty(shape, ndim, LT_FLOAT64, lt_cpu(), &t) != LT_OK) return NULL;
  double *p = lt_data(t);
  for (int64_t i = 0; i < lt_numel(t); i++) {
    double v = r.lo + (r.hi - r.lo) * uniform01();
    if (r.signed_ && uniform01() < 0.5) v = -v;
    p[i] = v;
  }
  if (grad) lt_requires_grad_(t, true);
  return t;
}

static lt_tensor *tensor_of(const int64_t *shape, int ndim, const double *v) {
  lt_tensor *t = NULL;
  lt_from_buffer(v, LT_FLOAT64, shape, ndim, LT_FLOAT64, lt_cpu(), &t);
  return t;
}

/* ---- the ops under test ---- */

typedef struct bin_ctx {
  lt_binary_op op;
  double s;
  bool scalar, scalar_first, inplace;
} bin_ctx;

static lt_status f_binary(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const bin_ctx *c = vctx;
  if (!c->inplace) {
    if (c->scalar) return lt_binary_scalar(c->op, in[0], c->s, false, c->scalar_first, out);
    return lt_binary(c->op, in[0], in[1], out);
  }
  /* in place on a non-leaf copy of in[0] (history rebased onto the copy) */
  LT_TRY(lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, out));
  return c->scalar ? lt_binary_scalar_(c->op, *out, c->s, false) : lt_binary_(c->op, *out, in[1]);
}

typedef struct un_ctx {
  lt_unary_op op;
  bool inplace;
} un_ctx;

static lt_status f_unary(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const un_ctx *c = vctx;
  if (!c->inplace) return lt_unary(c->op, in[0], out);
  LT_TRY(lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, out));
  return lt_unary_(c->op, *out);
}

static void test_binary_ops(void) {
  const lt_binary_op ops[] = {LT_OP_ADD, LT_OP_SUB, LT_OP_MUL, LT_OP_DIV,
                              LT_OP_POW, LT_OP_MAXIMUM, LT_OP_MINIMUM};
  /* shapes: same, broadcast one side, broadcast both sides */
  const int64_t sa[3][3] = {{2, 3}, {2, 3}, {2, 1, 3}}, sb[3][3] = {{2, 3}, {3}, {4, 1}};
  const int na[3] = {2, 2, 3}, nb[3] = {2, 1, 2};
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
    value_range r = ops[o] == LT_OP_POW || ops[o] == LT_OP_DIV ? POSITIVE : ANY;
    for (int k = 0; k < 3; k++) {
      lt_tensor *in[2] = {random_tensor(sa[k], na[k], r, true), random_tensor(sb[k], nb[k], r, true)};
      bin_ctx c = {ops[o], 0, false, false, false};
      char name[64];
      snprintf(name, sizeof name, "%s (shapes %d)", lt_binary_op_name(ops[o]), k);
      CHECK(gradcheck(name, NULL, f_binary, in, 2, &c));
      release_all(in, 2);
    }
    /* scalar on either side */
    for (int first = 0; first < 2; first++) {
      lt_tensor *in[1] = {random_tensor(SHAPE(3, 2), 2, r, true)};
      bin_ctx c = {ops[o], 1.7, true, first == 1, false};
      char name[64];
      snprintf(name, sizeof name, "%s scalar (first %d)", lt_binary_op_name(ops[o]), first);
      CHECK(gradcheck(name, NULL, f_binary, in, 1, &c));
      release_all(in, 1);
    }
    /* in place, tensor and scalar operand */
    {
      lt_tensor *in[2] = {random_tensor(SHAPE(2, 3), 2, r, true), random_tensor(SHAPE(3), 1, r, true)};
      bin_ctx c = {ops[o], 0, false, false, true};
      char name[64];
      snprintf(name, sizeof name, "%s_ in place", lt_binary_op_name(ops[o]));
      CHECK(gradcheck(name, NULL, f_binary, in, 2, &c));
      release_all(in, 2);
      lt_tensor *in1[1] = {random_tensor(SHAPE(2, 3), 2, r, true)};
      bin_ctx cs = {ops[o], 0.8, true, false, true};
      snprintf(name, sizeof name, "%s_ scalar in place", lt_binary_op_name(ops[o]));
      CHECK(gradcheck(name, NULL, f_binary, in1, 1, &cs));
      release_all(in1, 1);
    }
  }
  /* pow with a negative base and an integer exponent, and a mixed-dtype add
   * (the float32 side gets a float32 gradient). */
  {
    lt_tensor *in[1] = {random_tensor(SHAPE(4), 1, AWAY_FROM_ZERO, true)};
    bin_ctx c = {LT_OP_POW, 3.0, true, false, false};
    CHECK(gradcheck("pow(negative base, 3)", NULL, f_binary, in, 1, &c));
    release_all(in, 1);
  }
  {
    lt_tensor *a = random_tensor(SHAPE(2, 2), 2, ANY, false), *b = NULL, *y = NULL, *loss = NULL;
    lt_to_dtype(a, LT_FLOAT32, false, &b); /* a float32 leaf */
    lt_tensor_release(a);
    lt_requires_grad_(b, true);
    lt_tensor *c = random_tensor(SHAPE(2, 2), 2, ANY, true);
    CHECK(lt_binary(LT_OP_MUL, b, c, &y) == LT_OK);
    CHECK(y->dtype == LT_FLOAT64);
    CHECK(lt_sum(y, NULL, 0, false, &loss) == LT_OK);
    CHECK(lt_backward(loss, NULL, false) == LT_OK);
    CHECK(b->grad && b->grad->dtype == LT_FLOAT32);
    CHECK(c->grad && c->grad->dtype == LT_FLOAT64);
    if (b->grad) CHECK(fabs(gc_element(b->grad, 0) - gc_element(c, 0)) < 1e-6);
    lt_tensor *all[] = {b, c, y, loss};
    release_all(all, 4);
  }
}

static void test_extremum_ties(void) {
  /* maximum/minimum split the gradient of a tie in halves (PyTorch) */
  lt_tensor *a = tensor_of(SHAPE(3), 1, (const double[]){1, 2, 3});
  lt_tensor *b = tensor_of(SHAPE(3), 1, (const double[]){0, 2, 5});
  lt_requires_grad_(a, true);
  lt_requires_grad_(b, true);
  lt_tensor *m = NULL, *loss = NULL;
  CHECK(lt_binary(LT_OP_MAXIMUM, a, b, &m) == LT_OK);
  CHECK(lt_sum(m, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  CHECK(a->grad && gc_element(a->grad, 0) == 1 && gc_element(a->grad, 1) == 0.5 && gc_element(a->grad, 2) == 0);
  CHECK(b->grad && gc_element(b->grad, 0) == 0 && gc_element(b->grad, 1) == 0.5 && gc_element(b->grad, 2) == 1);
  lt_tensor *all[] = {a, b, m, loss};
  release_all(all, 4);
}

static void test_unary_ops(void) {
  for (int op = 0; op < LT_NUNARY; op++) {
    if (op == LT_OP_LOGICAL_NOT) continue;
    value_range r = ANY;
    if (op == LT_OP_LOG || op == LT_OP_SQRT || op == LT_OP_RSQRT || op == LT_OP_RECIPROCAL)
      r = POSITIVE;
    if (op == LT_OP_ABS || op == LT_OP_RELU || op == LT_OP_SIGN) r = AWAY_FROM_ZERO;
    if (op == LT_OP_FLOOR || op == LT_OP_CEIL || op == LT_OP_ROUND) r = (value_range){0.1, 0.4, true};
    for (int inplace = 0; inplace < 2; inplace++) {
      lt_tensor *in[1] = {random_tensor(SHAPE(2, 3), 2, r, true)};
      un_ctx c = {(lt_unary_op)op, inplace == 1};
      char name[64];
      snprintf(name, sizeof name, "%s%s", lt_unary_op_name((lt_unary_op)op), inplace ? "_" : "");
      CHECK(gradcheck(name, NULL, f_unary, in, 1, &c));
      release_all(in, 1);
    }
  }
}

typedef struct clamp_ctx {
  bool has_lo, has_hi, inplace;
  double lo, hi;
} clamp_ctx;

static lt_status f_clamp(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const clamp_ctx *c = vctx;
  if (!c->inplace) return lt_clamp(in[0], c->has_lo, c->lo, c->has_hi, c->hi, out);
  LT_TRY(lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, out));
  return lt_clamp_(*out, c->has_lo, c->lo, c->has_hi, c->hi);
}

static lt_status f_where(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  return lt_where(in[2], in[0], in[1], out);
}

static void test_clamp_where(void) {
  const clamp_ctx cases[] = {{true, true, false, -0.35, 0.45}, {true, false, false, 0.05, 0},
                             {false, true, false, 0, -0.15}, {true, true, true, -0.35, 0.45}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    /* values on a grid that stays away from the bounds */
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = -1.0 + 0.17 * i + 0.001;
    lt_tensor *in[1] = {tensor_of(SHAPE(3, 4), 2, v)};
    lt_requires_grad_(in[0], true);
    CHECK(gradcheck("clamp", NULL, f_clamp, in, 1, &cases[k]));
    release_all(in, 1);
  }
  lt_tensor *in[3] = {random_tensor(SHAPE(2, 3), 2, ANY, true), random_tensor(SHAPE(3), 1, ANY, true),
                      NULL};
  lt_tensor *r = random_tensor(SHAPE(2, 1), 2, ANY, false);
  lt_binary_scalar(LT_OP_GT, r, 0.0, false, false, &in[2]);
  CHECK(gradcheck("where", NULL, f_where, in, 3, NULL));
  release_all(in, 3);
  lt_tensor_release(r);
}

/* ---- reductions ---- */

typedef struct reduce_ctx {
  int which; /* 0 sum, 1 mean, 2 prod, 3 max_dim, 4 min_dim, 5 max_all, 6 min_all */
  int dims[3], ndims;
  bool keepdim;
} reduce_ctx;

static lt_status f_reduce(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const reduce_ctx *c = vctx;
  lt_tensor *idx = NULL;
  lt_status st;
  switch (c->which) {
    case 0: return lt_sum(in[0], c->dims, c->ndims, c->keepdim, out);
    case 1: return lt_mean(in[0], c->dims, c->ndims, c->keepdim, out);
    case 2: return lt_prod(in[0], c->dims, c->ndims, c->keepdim, out);
    case 3:
    case 4:
      st = (c->which == 3 ? lt_max_dim : lt_min_dim)(in[0], c->dims[0], c->keepdim, 1, out, &idx);
      if (idx) lt_tensor_release(idx);
      return st;
    case 5: return lt_max_all(in[0], out);
    default: return lt_min_all(in[0], out);
  }
}

static void test_reductions(void) {
  const reduce_ctx cases[] = {
      {0, {0}, 0, false}, {0, {1}, 1, false}, {0, {0, 2}, 2, true}, {1, {0}, 0, false},
      {1, {2}, 1, false}, {1, {0, 1}, 2, true}, {2, {0}, 0, false}, {2, {1}, 1, false},
      {2, {0, 2}, 2, true}, {3, {1}, 1, false}, {3, {2}, 1, true},  {4, {0}, 1, false},
      {5, {0}, 0, false}, {6, {0}, 0, false},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    lt_tensor *in[1] = {random_tensor(SHAPE(2, 3, 2), 3, POSITIVE, true)};
    char name[64];
    snprintf(name, sizeof name, "reduction case %zu", k);
    CHECK(gradcheck(name, NULL, f_reduce, in, 1, &cases[k]));
    release_all(in, 1);
  }
  /* prod with one zero and with two zeros in a slice */
  const double v[6] = {0.0, 2.0, 3.0, 0.0, 0.0, 4.0};
  for (int k = 0; k < 2; k++) {
    lt_tensor *in[1] = {tensor_of(SHAPE(2, 3), 2, v)};
    lt_requires_grad_(in[0], true);
    reduce_ctx c = {2, {k}, k == 0 ? 0 : 1, false};
    CHECK(gradcheck("prod with zeros", NULL, f_reduce, in, 1, &c));
    release_all(in, 1);
  }
  /* max_all shares among ties: [1, 3, 3] -> [0, 0.5, 0.5] */
  lt_tensor *x = tensor_of(SHAPE(3), 1, (const double[]){1, 3, 3}), *m = NULL;
  lt_requires_grad_(x, true);
  CHECK(lt_max_all(x, &m) == LT_OK);
  CHECK(lt_backward(m, NULL, false) == LT_OK);
  CHECK(x->grad && gc_element(x->grad, 0) == 0 && gc_element(x->grad, 1) == 0.5 && gc_element(x->grad, 2) == 0.5);
  lt_tensor_release(m);
  /* max over a dim: all of it to the returned (first) index */
  lt_tensor *v2 = NULL, *i2 = NULL, *loss = NULL;
  lt_tensor_release(x->grad);
  x->grad = NULL;
  CHECK(lt_max_dim(x, 0, false, 1, &v2, &i2) == LT_OK);
  CHECK(lt_sum(v2, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  CHECK(x->grad && gc_element(x->grad, 0) == 0 && gc_element(x->grad, 1) == 1 && gc_element(x->grad, 2) == 0);
  lt_tensor *all[] = {x, v2, i2, loss};
  release_all(all, 4);
}

/* ---- matmul ---- */

static lt_status f_matmul(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  return lt_matmul(in[0], in[1], out);
}

static lt_status f_matmul_bt(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx; /* x @ w^T, as a linear layer: a transposed (strided) operand */
  lt_tensor *wt = NULL;
  LT_TRY(lt_transpose(in[1], 0, 1, &wt));
  lt_status st = lt_matmul(in[0], wt, out);
  lt_tensor_release(wt);
  return st;
}

static void test_matmul(void) {
  const struct {
    int64_t a[4], b[4];
    int na, nb;
  } cases[] = {
      {{3}, {3}, 1, 1},          {{3}, {3, 2}, 1, 2},          {{2, 3}, {3}, 2, 1},
      {{2, 3}, {3, 4}, 2, 2},    {{2, 2, 3}, {3, 4}, 3, 2},    {{2, 3}, {2, 3, 4}, 2, 3},
      {{3}, {2, 3, 2}, 1, 3},    {{2, 2, 3}, {3}, 3, 1},       {{2, 1, 2, 3}, {3, 3, 2}, 4, 3},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    lt_tensor *in[2] = {random_tensor(cases[k].a, cases[k].na, ANY, true),
                        random_tensor(cases[k].b, cases[k].nb, ANY, true)};
    char name[64];
    snprintf(name, sizeof name, "matmul case %zu", k);
    CHECK(gradcheck(name, NULL, f_matmul, in, 2, NULL));
    release_all(in, 2);
  }
  lt_tensor *in[2] = {random_tensor(SHAPE(4, 3), 2, ANY, true), random_tensor(SHAPE(5, 3), 2, ANY, true)};
  CHECK(gradcheck("x @ w^T", NULL, f_matmul_bt, in, 2, NULL));
  release_all(in, 2);
  /* only one side requiring grad */
  lt_tensor *in2[2] = {random_tensor(SHAPE(4, 3), 2, ANY, false), random_tensor(SHAPE(3, 2), 2, ANY, true)};
  CHECK(gradcheck("matmul, b only", NULL, f_matmul, in2, 2, NULL));
  CHECK(in2[0]->grad == NULL);
  release_all(in2, 2);
}

/* ---- views, joins, conversions ---- */

static lt_status f_views(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  int which = *(const int *)vctx;
  const lt_tensor *x = in[0]; /* [2, 3, 4] */
  lt_tensor *t = NULL, *u = NULL;
  lt_status st = LT_OK;
  switch (which) {
    case 0: return lt_view(x, SHAPE(6, 4), 2, out);
    case 1: /* reshape of a transposed tensor copies */
      LT_TRY(lt_transpose(x, 0, 2, &t));
      st = lt_reshape(t, SHAPE(4, 6), 2, out);
      break;
    case 2: return lt_permute(x, (const int[]){2, 0, 1}, 3, out);
    case 3: return lt_narrow(x, 2, 1, 2, out);
    case 4: return lt_select(x, 1, -1, out);
    case 5: /* expand a [2, 1, 4] slice to [3, 2, 3, 4] */
      LT_TRY(lt_narrow(x, 1, 1, 1, &t));
      st = lt_expand(t, SHAPE(3, 2, 3, 4), 4, out);
      break;
    case 6:
      LT_TRY(lt_unsqueeze(x, 1, &t));
      st = lt_squeeze(t, 1, out);
      break;
    case 7: return lt_flatten(x, 1, 2, out);
    case 8: /* a chain of views then contiguous */
      LT_TRY(lt_transpose(x, 1, 2, &t));
      st = lt_narrow(t, 0, 1, 1, &u);
      if (st == LT_OK) st = lt_contiguous(u, out);
      break;
    case 9: return lt_squeeze_all(x, out);
    default: return lt_clone(x, out);
  }
  if (t) lt_tensor_release(t);
  if (u) lt_tensor_release(u);
  return st;
}

static lt_status f_cat(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  return lt_cat(in, 3, *(const int *)ctx, out);
}

static lt_status f_stack(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  return lt_stack(in, 3, *(const int *)ctx, out);
}

static lt_status f_to_float32(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx; /* through float32 and back: the gradient is cast back */
  lt_tensor *t = NULL;
  LT_TRY(lt_to_dtype(in[0], LT_FLOAT32, false, &t));
  lt_status st = lt_binary_scalar(LT_OP_MUL, t, 2.0, false, false, out);
  lt_tensor_release(t);
  return st;
}

static lt_status f_copy_(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx; /* y = x * 1 overwritten by src (broadcast): the gradient flows to src only */
  lt_tensor *y = NULL;
  LT_TRY(lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, &y));
  lt_status st = lt_copy_(y, in[1]);
  if (st == LT_OK) st = lt_binary(LT_OP_MUL, y, y, out);
  lt_tensor_release(y);
  return st;
}

static lt_status f_fill_(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL;
  LT_TRY(lt_binary_scalar(LT_OP_MUL, in[0], 3.0, false, false, &y));
  lt_status st = lt_fill_(y, 2.0);
  if (st == LT_OK) st = lt_binary(LT_OP_ADD, y, in[0], out);
  lt_tensor_release(y);
  return st;
}

static void test_views_and_joins(void) {
  for (int which = 0; which <= 10; which++) {
    lt_tensor *in[1] = {random_tensor(SHAPE(2, 3, 4), 3, ANY, true)};
    char name[64];
    snprintf(name, sizeof name, "view case %d", which);
    CHECK(gradcheck(name, NULL, f_views, in, 1, &which));
    release_all(in, 1);
  }
  for (int dim = 0; dim < 2; dim++) {
    lt_tensor *in[3] = {random_tensor(SHAPE(2, 3), 2, ANY, true), random_tensor(SHAPE(2, 3), 2, ANY, false),
                        random_tensor(SHAPE(2, 3), 2, ANY, true)};
    CHECK(gradcheck("cat", NULL, f_cat, in, 3, &dim));
    CHECK(gradcheck("stack", NULL, f_stack, in, 3, &dim));
    release_all(in, 3);
  }
  {
    int dim = 1;
    lt_tensor *in[3] = {random_tensor(SHAPE(2, 1), 2, ANY, true), random_tensor(SHAPE(2, 4), 2, ANY, true),
                        random_tensor(SHAPE(2, 2), 2, ANY, true)};
    CHECK(gradcheck("cat (unequal sizes)", NULL, f_cat, in, 3, &dim));
    release_all(in, 3);
  }
  {
    /* float32 in the middle: finite differences need a coarser check */
    lt_tensor *x = random_tensor(SHAPE(3), 1, ANY, true), *y = NULL, *loss = NULL;
    CHECK(f_to_float32(&x, NULL, &y) == LT_OK);
    CHECK(y && lt_grad_fn_name(y) && strcmp(lt_grad_fn_name(y), "MulBackward") == 0);
    CHECK(lt_sum(y, NULL, 0, false, &loss) == LT_OK);
    CHECK(lt_backward(loss, NULL, false) == LT_OK);
    CHECK(x->grad && x->grad->dtype == LT_FLOAT64 && gc_element(x->grad, 2) == 2.0);
    lt_tensor *all[] = {x, y, loss};
    release_all(all, 3);
  }
  {
    lt_tensor *in[2] = {random_tensor(SHAPE(2, 3), 2, ANY, true), random_tensor(SHAPE(3), 1, ANY, true)};
    CHECK(gradcheck("copy_", NULL, f_copy_, in, 2, NULL));
    CHECK(in[0]->grad && gc_element(in[0]->grad, 0) == 0.0); /* overwritten: zero gradient */
    release_all(in, 2);
    lt_tensor *in1[1] = {random_tensor(SHAPE(2, 3), 2, ANY, true)};
    CHECK(gradcheck("fill_", NULL, f_fill_, in1, 1, NULL));
    release_all(in1, 1);
  }
}

/* ---- engine behaviour ---- */

static lt_tensor *square_sum(lt_tensor *x) { /* sum(x * x) */
  lt_tensor *y = NULL, *loss = NULL;
  if (lt_binary(LT_OP_MUL, x, x, &y) != LT_OK) return NULL;
  lt_sum(y, NULL, 0, false, &loss);
  lt_tensor_release(y);
  return loss;
}

static void test_accumulation_and_retain(void) {
  lt_tensor *x = tensor_of(SHAPE(2), 1, (const double[]){1, 2});
  lt_requires_grad_(x, true);
  lt_tensor *loss = square_sum(x);
  CHECK(lt_backward(loss, NULL, true) == LT_OK);
  CHECK(x->grad && gc_element(x->grad, 0) == 2 && gc_element(x->grad, 1) == 4);
  CHECK(x->grad && lt_block_category(x->grad->storage->block) == LT_CAT_GRADIENT);
  CHECK(lt_backward(loss, NULL, false) == LT_OK); /* retained: a second pass works and adds */
  CHECK(x->grad && gc_element(x->grad, 0) == 4 && gc_element(x->grad, 1) == 8);
  CHECK(lt_backward(loss, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "backward: trying to backward through the graph a second time") != NULL);
  CHECK(strstr(lt_last_error(), "retain_graph=true") != NULL);
  lt_tensor_release(loss);
  /* two separate graphs accumulate */
  loss = square_sum(x);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  CHECK(x->grad && gc_element(x->grad, 1) == 12);
  lt_tensor_release(loss);
  /* an explicit gradient for a non-scalar root; a leaf root */
  lt_tensor *y = NULL, *g = tensor_of(SHAPE(2), 1, (const double[]){1, 10});
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 3.0, false, false, &y) == LT_OK);
  lt_tensor_release(x->grad);
  x->grad = NULL;
  CHECK(lt_backward(y, g, false) == LT_OK);
  CHECK(x->grad && gc_element(x->grad, 0) == 3 && gc_element(x->grad, 1) == 30);
  CHECK(lt_backward(x, g, false) == LT_OK);
  CHECK(x->grad && gc_element(x->grad, 0) == 4 && gc_element(x->grad, 1) == 40);
  CHECK(gc_element(g, 1) == 10); /* the given gradient was not written to */
  /* a tensor used twice sums its gradients: y = x*3 used in y + y*y */
  lt_tensor *yy = NULL, *z = NULL, *zs = NULL;
  lt_tensor_release(x->grad);
  x->grad = NULL;
  lt_tensor_release(y);
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 3.0, false, false, &y) == LT_OK);
  CHECK(lt_binary(LT_OP_MUL, y, y, &yy) == LT_OK);
  CHECK(lt_binary(LT_OP_ADD, y, yy, &z) == LT_OK);
  CHECK(lt_sum(z, NULL, 0, false, &zs) == LT_OK);
  CHECK(lt_backward(zs, NULL, false) == LT_OK);
  /* d/dx (3x + 9x^2) = 3 + 18x */
  CHECK(x->grad && gc_element(x->grad, 0) == 21 && gc_element(x->grad, 1) == 39);
  lt_tensor *all[] = {x, y, g, yy, z, zs};
  release_all(all, 6);
}

static void test_errors(void) {
  lt_tensor *x = tensor_of(SHAPE(2, 3), 2, (const double[]){1, 2, 3, 4, 5, 6}), *y = NULL;
  CHECK(lt_backward(x, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "backward: element 1 of tensors does not require grad and does not have a grad_fn") != NULL);
  lt_requires_grad_(x, true);
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 2.0, false, false, &y) == LT_OK);
  CHECK(lt_backward(y, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "backward: grad can be implicitly created only for scalar outputs (shape [2, 3])") != NULL);
  lt_tensor *g = tensor_of(SHAPE(3), 1, (const double[]){1, 1, 1});
  CHECK(lt_backward(y, g, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "shape") && strstr(lt_last_error(), "[3]") && strstr(lt_last_error(), "[2, 3]"));
  /* requires_grad_ */
  lt_tensor *i = NULL;
  CHECK(lt_zeros(SHAPE(2), 1, LT_INT64, lt_cpu(), &i) == LT_OK);
  CHECK(lt_requires_grad_(i, true) != LT_OK);
  CHECK(strstr(lt_last_error(), "int64") != NULL);
  CHECK(!i->requires_grad);
  CHECK(lt_requires_grad_(y, false) != LT_OK); /* a non-leaf */
  CHECK(lt_requires_grad_(y, true) == LT_OK);
  CHECK(lt_is_leaf(x) && !lt_is_leaf(y));
  CHECK(lt_grad_fn_name(x) == NULL);
  CHECK(lt_grad_fn_name(y) && strcmp(lt_grad_fn_name(y), "MulBackward") == 0);
  /* in place on a leaf that requires grad; allowed in no_grad */
  CHECK(lt_unary_(LT_OP_RELU, x) != LT_OK);
  CHECK(strstr(lt_last_error(), "relu_: a leaf tensor that requires grad is used in an in-place operation") != NULL);
  CHECK(gc_element(x, 0) == 1);
  bool prev = lt_set_grad_enabled(false);
  CHECK(prev);
  CHECK(lt_binary_scalar_(LT_OP_ADD, x, 1.0, false) == LT_OK);
  lt_set_grad_enabled(prev);
  CHECK(lt_is_grad_enabled());
  CHECK(gc_element(x, 0) == 2 && lt_is_leaf(x));
  /* the printer shows the grad_fn */
  char *s = lt_tensor_to_string(y);
  CHECK(s && strstr(s, "grad_fn=<MulBackward>") != NULL);
  free(s);
  /* in place on a view that requires grad: recorded on the base (the
   * gradients are checked in test_autograd_views.c) */
  lt_tensor *v = NULL;
  CHECK(lt_select(y, 0, 0, &v) == LT_OK);
  CHECK(lt_unary_(LT_OP_RELU, v) == LT_OK);
  CHECK(lt_grad_fn_name(y) && strcmp(lt_grad_fn_name(y), "CopySlices") == 0);
  CHECK(lt_grad_fn_name(v) && strcmp(lt_grad_fn_name(v), "AsStridedBackward") == 0);
  s = lt_tensor_to_string(x);
  CHECK(s && strstr(s, "requires_grad=true") != NULL);
  free(s);
  lt_tensor *all[] = {x, y, g, i, v};
  release_all(all, 5);
}

static void test_version_counter(void) {
  lt_tensor *x = random_tensor(SHAPE(3), 1, ANY, true), *w = random_tensor(SHAPE(3), 1, ANY, true);
  lt_tensor *u = NULL, *h = NULL, *loss = NULL;
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 2.0, false, false, &u) == LT_OK); /* saves nothing */
  CHECK(lt_binary(LT_OP_MUL, u, w, &h) == LT_OK);                          /* saves u and w */
  CHECK(lt_unary_(LT_OP_RELU, u) == LT_OK);                               /* u: version 1 */
  CHECK(lt_sum(h, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "backward: a tensor saved by MulBackward was modified by an in-place operation (relu_): version 1, expected 0") != NULL);
  lt_tensor *all[] = {x, w, u, h, loss};
  release_all(all, 5);

  /* in place on a non-leaf rebases its history: x -> lin -> relu_ trains */
  x = random_tensor(SHAPE(2, 3), 2, ANY, true);
  w = random_tensor(SHAPE(3, 4), 2, ANY, true);
  lt_tensor *y = NULL;
  CHECK(lt_matmul(x, w, &y) == LT_OK);
  CHECK(lt_unary_(LT_OP_RELU, y) == LT_OK);
  CHECK(lt_grad_fn_name(y) && strcmp(lt_grad_fn_name(y), "ReluBackward") == 0);
  CHECK(lt_sum(y, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  CHECK(w->grad != NULL && x->grad != NULL);
  /* expected: x^T @ (y > 0) */
  if (w->grad) {
    double expect = 0;
    for (int r = 0; r < 2; r++) expect += gc_element(x, r * 3) * (gc_element(y, r * 4) > 0 ? 1 : 0);
    CHECK(fabs(gc_element(w->grad, 0) - expect) < 1e-12);
  }
  lt_tensor *all2[] = {x, w, y, loss};
  release_all(all2, 4);
}

static void test_graph_memory(void) {
  lt_tensor *w = random_tensor(SHAPE(64, 64), 2, ANY, true), *b = random_tensor(SHAPE(64), 1, ANY, true);
  lt_tensor *x = random_tensor(SHAPE(32, 64), 2, ANY, false);
  /* one step to create the gradients, then measure a second */
  for (int step = 0; step < 2; step++) {
    size_t before = allocated_bytes();
    lt_tensor *h = NULL, *hb = NULL, *h2 = NULL, *loss = NULL;
    CHECK(lt_matmul(x, w, &h) == LT_OK);
    CHECK(lt_binary(LT_OP_ADD, h, b, &hb) == LT_OK);
    CHECK(lt_unary_(LT_OP_RELU, hb) == LT_OK);
    CHECK(lt_matmul(hb, w, &h2) == LT_OK);
    lt_tensor_release(h);
    lt_tensor_release(hb);
    lt_tensor *t = NULL;
    CHECK(lt_unary(LT_OP_TANH, h2, &t) == LT_OK);
    lt_tensor_release(h2);
    CHECK(lt_mean(t, NULL, 0, false, &loss) == LT_OK);
    lt_tensor_release(t);
    CHECK(allocated_bytes() > before); /* saved activations */
    CHECK(lt_backward(loss, NULL, false) == LT_OK);
    size_t loss_bytes = lt_block_size(loss->storage->block);
    if (step == 1) CHECK_EQ_INT(allocated_bytes(), before + loss_bytes);
    lt_tensor_release(loss);
    if (step == 1) CHECK_EQ_INT(allocated_bytes(), before);
  }
  /* dropping a graph without backward frees it too */
  size_t before = allocated_bytes();
  lt_tensor *h = NULL, *loss = NULL;
  CHECK(lt_matmul(x, w, &h) == LT_OK);
  CHECK(lt_unary_(LT_OP_SIGMOID, h) == LT_OK);
  CHECK(lt_sum(h, NULL, 0, false, &loss) == LT_OK);
  size_t held = allocated_bytes();
  size_t given_back = lt_tensor_release(h);
  given_back += lt_tensor_release(loss); /* counts the saved tensors it frees (lt.del) */
  CHECK_EQ_INT(allocated_bytes(), before);
  CHECK_EQ_INT(given_back, held - before);
  /* a long chain is freed without deep recursion */
  lt_tensor *c = NULL;
  lt_binary_scalar(LT_OP_MUL, b, 1.0, false, false, &c);
  for (int i = 0; i < 200000; i++) {
    lt_tensor *next = NULL;
    lt_unary(LT_OP_NEG, c, &next);
    lt_tensor_release(c);
    c = next;
  }
  lt_tensor_release(c);
  CHECK_EQ_INT(allocated_bytes(), before);
  lt_tensor *all[] = {w, b, x};
  release_all(all, 3);
}

static void test_no_grad(void) {
  lt_tensor *w = random_tensor(SHAPE(16, 16), 2, ANY, true), *x = random_tensor(SHAPE(16), 1, ANY, false);
  size_t before = allocated_bytes();
  bool prev = lt_set_grad_enabled(false);
  lt_tensor *y = NULL, *z = NULL;
  CHECK(lt_matmul(w, x, &y) == LT_OK);
  CHECK(lt_unary(LT_OP_TANH, y, &z) == LT_OK);
  CHECK(!z->requires_grad && lt_is_leaf(z) && lt_grad_fn_name(z) == NULL && z->autograd == NULL);
  lt_tensor_release(y);
  lt_tensor_release(z);
  CHECK_EQ_INT(allocated_bytes(), before);
  /* y alone: exactly its own bytes, nothing saved */
  CHECK(lt_matmul(w, x, &y) == LT_OK);
  CHECK_EQ_INT(allocated_bytes(), before + lt_block_size(y->storage->block));
  CHECK(lt_block_category(w->storage->block) != LT_CAT_ACTIVATION);
  lt_tensor_release(y);
  lt_set_grad_enabled(prev);
  /* with grad, the saved input is counted as an activation */
  CHECK(lt_matmul(w, x, &y) == LT_OK);
  CHECK(lt_block_category(x->storage->block) == LT_CAT_ACTIVATION);
  CHECK(y->requires_grad && !lt_is_leaf(y));
  lt_tensor_release(y);
  lt_tensor_release(w);
  lt_tensor_release(x);
}

/* A saved tensor counts as an activation exactly while some graph keeps it:
 * two graphs save x, it stays one until both are gone; a parameter saved by
 * a graph stays a parameter. */
static size_t activation_bytes(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  return (size_t)s.category_bytes[LT_CAT_ACTIVATION].current;
}

static void test_saved_category(void) {
  lt_tensor *w = random_tensor(SHAPE(16, 16), 2, ANY, true), *x = random_tensor(SHAPE(16), 1, ANY, false);
  lt_tensor *g = random_tensor(SHAPE(16), 1, ANY, false);
  lt_block_set_category(w->storage->block, LT_CAT_PARAMETER);
  const size_t before = activation_bytes(), xbytes = lt_block_size(x->storage->block);
  lt_tensor *y1 = NULL, *y2 = NULL;
  CHECK(lt_matmul(w, x, &y1) == LT_OK);
  CHECK(lt_matmul(w, x, &y2) == LT_OK);
  CHECK(lt_block_category(x->storage->block) == LT_CAT_ACTIVATION);
  CHECK_EQ_INT(activation_bytes(), before + xbytes);
  /* backward without retain_graph frees y1's saved x; y2's graph still has it */
  CHECK(lt_backward(y1, g, false) == LT_OK);
  CHECK(lt_block_category(x->storage->block) == LT_CAT_ACTIVATION);
  CHECK(lt_backward(y2, g, true) == LT_OK); /* retained: still saved */
  CHECK(lt_block_category(x->storage->block) == LT_CAT_ACTIVATION);
  lt_tensor_release(y2); /* the graph dropped */
  CHECK(lt_block_category(x->storage->block) == LT_CAT_OTHER);
  CHECK_EQ_INT(activation_bytes(), before);
  lt_tensor_release(y1);
  /* w saved for x's gradient keeps its own category, before and after */
  CHECK(lt_requires_grad_(x, true) == LT_OK);
  CHECK(lt_matmul(w, x, &y1) == LT_OK);
  CHECK(lt_block_category(w->storage->block) == LT_CAT_PARAMETER);
  CHECK(lt_backward(y1, g, false) == LT_OK);
  CHECK(lt_block_category(w->storage->block) == LT_CAT_PARAMETER);
  CHECK(lt_block_category(x->storage->block) == LT_CAT_OTHER);
  CHECK_EQ_INT(activation_bytes(), before);
  lt_tensor *all[] = {y1, w, x, g};
  release_all(all, 4);
}

/* A custom node: y = 2 x (forward run by the caller), backward gives 2 g
 * to the first input and nothing to the second. */
typedef struct custom_ud {
  int calls, freed;
} custom_ud;

static lt_status double_backward(void *ud, lt_tensor *const *go, int nout, lt_tensor **gi, int nin) {
  custom_ud *u = ud;
  u->calls++;
  if (nout != 2 || nin != 2) return lt_error(LT_ERR_INTERNAL, "custom: wrong counts");
  /* output 2 received no gradient: it comes as zeros */
  if (gc_element(go[1], 0) != 0) return lt_error(LT_ERR_INTERNAL, "custom: expected zeros");
  return lt_binary_scalar(LT_OP_MUL, go[0], 2.0, false, false, &gi[0]);
}

static void free_custom(void *ud) { ((custom_ud *)ud)->freed++; }

static lt_status failing_backward(void *ud, lt_tensor *const *go, int nout, lt_tensor **gi, int nin) {
  (void)ud, (void)go, (void)nout, (void)gi, (void)nin;
  return lt_error(LT_ERR_ARG, "MyFn: backward failed on purpose");
}

static void test_custom(void) {
  lt_tensor *x = tensor_of(SHAPE(2), 1, (const double[]){1, 2});
  lt_tensor *other = tensor_of(SHAPE(2), 1, (const double[]){5, 6});
  lt_requires_grad_(x, true);
  lt_requires_grad_(other, true);
  custom_ud u = {0, 0};
  lt_tensor *outs[2] = {NULL, NULL}, *loss = NULL;
  bool prev = lt_set_grad_enabled(false);
  lt_binary_scalar(LT_OP_MUL, x, 2.0, false, false, &outs[0]);
  lt_binary_scalar(LT_OP_ADD, x, 0.0, false, false, &outs[1]);
  lt_set_grad_enabled(prev);
  lt_tensor *ins[2] = {x, other};
  CHECK(lt_autograd_custom(outs, 2, ins, 2, "DoubleBackward", double_backward, &u, free_custom) == LT_OK);
  CHECK(outs[0]->requires_grad && lt_grad_fn_name(outs[0]) &&
        strcmp(lt_grad_fn_name(outs[0]), "DoubleBackward") == 0);
  CHECK(lt_sum(outs[0], NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  CHECK(u.calls == 1 && u.freed == 1); /* freed after a backward without retain_graph */
  CHECK(x->grad && gc_element(x->grad, 0) == 2 && gc_element(x->grad, 1) == 2);
  CHECK(other->grad == NULL);
  lt_tensor_release(loss);
  lt_tensor_release(outs[0]);
  lt_tensor_release(outs[1]);
  /* nothing requires grad: ud freed at once */
  custom_ud u2 = {0, 0};
  lt_tensor *plain = tensor_of(SHAPE(1), 1, (const double[]){1}), *o = NULL;
  lt_clone(plain, &o);
  CHECK(lt_autograd_custom(&o, 1, &plain, 1, "NoneBackward", double_backward, &u2, free_custom) == LT_OK);
  CHECK(u2.freed == 1 && !o->requires_grad);
  lt_tensor_release(o);
  /* an output that is an input is refused (ud freed) */
  custom_ud u3 = {0, 0};
  CHECK(lt_autograd_custom(&x, 1, &x, 1, "SelfBackward", double_backward, &u3, free_custom) != LT_OK);
  CHECK(u3.freed == 1);
  /* a failing backward reports its message; the graph is freed with its last tensor */
  custom_ud u4 = {0, 0};
  lt_clone(x, &o);
  prev = lt_set_grad_enabled(false);
  lt_tensor_release(o);
  lt_clone(x, &o);
  lt_set_grad_enabled(prev);
  CHECK(lt_autograd_custom(&o, 1, &x, 1, "MyFnBackward", failing_backward, &u4, free_custom) == LT_OK);
  CHECK(lt_sum(o, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, true) != LT_OK);
  CHECK(strstr(lt_last_error(), "backward failed on purpose") != NULL);
  CHECK(u4.freed == 0);
  lt_tensor_release(loss);
  lt_tensor_release(o);
  CHECK(u4.freed == 1);
  lt_tensor *all[] = {x, other, plain};
  release_all(all, 3);
}

int main(void) {
  test_binary_ops();
  test_extremum_ties();
  test_unary_ops();
  test_clamp_where();
  test_reductions();
  test_matmul();
  test_views_and_joins();
  test_accumulation_and_retain();
  test_errors();
  test_version_counter();
  test_graph_memory();
  test_no_grad();
  test_saved_category();
  test_custom();
  return check_summary("test_autograd");
}
