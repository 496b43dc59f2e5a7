/* The engine's post-accumulate-grad hooks (lt_autograd_add_post_accumulate_hook)
 * and lt_autograd_reaches: a hook runs once per backward after the leaf's
 * last contribution with .grad complete, in registration order, not for a
 * leaf that got nothing; a failing hook's status ends the backward with its
 * message and a retained graph runs again; removal (also from inside a hook)
 * frees the user data once; hooks move with lt_autograd_move_hooks and are
 * freed with their tensor; bad arguments are errors. */
#include <stdlib.h>

#include "check.h"
#include "lt/lt.h"

typedef struct probe {
  int calls;
  double grad_sum_seen; /* sum of .grad when the hook ran */
  int order;            /* when it ran (the global counter) */
  bool fail;
  bool remove_self;
  uint64_t id;
} probe;

static int counter;
static int freed;

static double sum_of(const lt_tensor *t) {
  double s = 0;
  const double *p = lt_data(t);
  for (int64_t i = 0; i < lt_numel(t); i++) s += p[i];
  return s;
}

static lt_status record(void *ud, lt_tensor *leaf) {
  probe *p = ud;
  p->calls++;
  p->order = ++counter;
  p->grad_sum_seen = leaf->grad ? sum_of(leaf->grad) : -1;
  if (p->remove_self) lt_autograd_remove_post_accumulate_hook(leaf, p->id);
  if (p->fail) return lt_error(LT_ERR_AUTOGRAD, "hook failed on purpose");
  return LT_OK;
}

static void count_free(void *ud) {
  (void)ud;
  freed++;
}

static lt_tensor *leaf(double v, int64_t n) {
  lt_tensor *t = NULL;
  int64_t shape[1] = {n};
  lt_full(shape, 1, v, LT_FLOAT64, lt_cpu(), &t);
  lt_requires_grad_(t, true);
  return t;
}

/* w used by three nodes: y = sum(w*2) + sum(w*3) + sum(w*w) */
static lt_tensor *three_uses(lt_tensor *w) {
  lt_tensor *a = NULL, *b = NULL, *c = NULL, *sa = NULL, *sb = NULL, *sc = NULL, *ab = NULL, *y = NULL;
  lt_binary_scalar(LT_OP_MUL, w, 2.0, false, false, &a);
  lt_binary_scalar(LT_OP_MUL, w, 3.0, false, false, &b);
  lt_binary(LT_OP_MUL, w, w, &c);
  lt_sum(a, NULL, 0, false, &sa);
  lt_sum(b, NULL, 0, false, &sb);
  lt_sum(c, NULL, 0, false, &sc);
  lt_binary(LT_OP_ADD, sa, sb, &ab);
  lt_binary(LT_OP_ADD, ab, sc, &y);
  lt_tensor *all[] = {a, b, c, sa, sb, sc, ab};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) lt_tensor_release(all[i]);
  return y;
}

static void test_once_after_all_contributions(void) {
  lt_tensor *w = leaf(1.0, 3), *v = leaf(1.0, 2);
  probe p1 = {0}, p2 = {0}, pv = {0};
  uint64_t id1 = 0, id2 = 0, idv = 0;
  CHECK(lt_autograd_add_post_accumulate_hook(w, record, &p1, count_free, &id1) == LT_OK);
  CHECK(lt_autograd_add_post_accumulate_hook(w, record, &p2, NULL, &id2) == LT_OK);
  CHECK(lt_autograd_add_post_accumulate_hook(v, record, &pv, NULL, &idv) == LT_OK);
  CHECK(id1 != id2);
  lt_tensor *y = three_uses(w);
  CHECK(lt_backward(y, NULL, false) == LT_OK);
  CHECK_EQ_INT(p1.calls, 1);
  CHECK_EQ_INT(p2.calls, 1);
  CHECK(p1.order < p2.order); /* registration order */
  CHECK(p1.grad_sum_seen == 3 * 7.0); /* 2 + 3 + 2w at w = 1, complete */
  CHECK_EQ_INT(pv.calls, 0); /* v is not in the graph */
  lt_tensor_release(y);
  /* a backward from the leaf itself (its gradient: ones) */
  lt_tensor *ones = NULL;
  int64_t shape[1] = {3};
  lt_full(shape, 1, 1.0, LT_FLOAT64, lt_cpu(), &ones);
  CHECK(lt_backward(w, ones, false) == LT_OK);
  lt_tensor_release(ones);
  CHECK_EQ_INT(p1.calls, 2);
  CHECK(p1.grad_sum_seen == 3 * 7.0 + 3.0);
  /* removal frees the user data once; a second removal says so */
  CHECK(lt_autograd_remove_post_accumulate_hook(w, id1));
  CHECK_EQ_INT(freed, 1);
  CHECK(!lt_autograd_remove_post_accumulate_hook(w, id1));
  CHECK_EQ_INT(freed, 1);
  lt_tensor_release(w);
  lt_tensor_release(v);
}

static void test_failure_and_retained_graph(void) {
  lt_tensor *w = leaf(2.0, 2);
  probe bad = {.fail = true}, after = {0};
  uint64_t id = 0, id_after = 0;
  lt_autograd_add_post_accumulate_hook(w, record, &bad, NULL, &id);
  lt_autograd_add_post_accumulate_hook(w, record, &after, NULL, &id_after);
  lt_tensor *y = three_uses(w);
  CHECK(lt_backward(y, NULL, true) == LT_ERR_AUTOGRAD);
  CHECK_EQ_STR(lt_last_error(), "hook failed on purpose");
  CHECK_EQ_INT(after.calls, 0); /* the first failure stops the hooks */
  lt_autograd_remove_post_accumulate_hook(w, id);
  lt_tensor_release(w->grad);
  w->grad = NULL;
  CHECK(lt_backward(y, NULL, false) == LT_OK); /* the retained graph runs again */
  CHECK_EQ_INT(after.calls, 1);
  CHECK(after.grad_sum_seen == 2 * (2 + 3 + 2 * 2.0));
  lt_tensor_release(y);
  lt_tensor_release(w);
}

static void test_remove_inside_and_move(void) {
  lt_tensor *w = leaf(1.0, 1);
  probe once = {.remove_self = true}, stays = {0};
  lt_autograd_add_post_accumulate_hook(w, record, &once, count_free, &once.id);
  lt_autograd_add_post_accumulate_hook(w, record, &stays, count_free, &stays.id);
  freed = 0;
  for (int k = 0; k < 2; k++) {
    lt_tensor *y = three_uses(w);
    CHECK(lt_backward(y, NULL, false) == LT_OK);
    lt_tensor_release(y);
  }
  CHECK_EQ_INT(once.calls, 1);
  CHECK_EQ_INT(stays.calls, 2);
  CHECK_EQ_INT(freed, 1);
  /* moved to another leaf: they run for it, and go with it */
  lt_tensor *w2 = leaf(1.0, 1);
  CHECK(lt_autograd_move_hooks(w, w2) == LT_OK);
  lt_tensor *y = three_uses(w);
  CHECK(lt_backward(y, NULL, false) == LT_OK);
  lt_tensor_release(y);
  CHECK_EQ_INT(stays.calls, 2);
  y = three_uses(w2);
  CHECK(lt_backward(y, NULL, false) == LT_OK);
  lt_tensor_release(y);
  CHECK_EQ_INT(stays.calls, 3);
  lt_tensor_release(w);
  CHECK_EQ_INT(freed, 1);
  lt_tensor_release(w2);
  CHECK_EQ_INT(freed, 2); /* freed with its tensor */
}

static void test_refusals(void) {
  lt_tensor *w = leaf(1.0, 2), *y = NULL, *plain = NULL;
  probe p = {0};
  uint64_t id = 0;
  int64_t shape[1] = {2};
  lt_binary_scalar(LT_OP_MUL, w, 2.0, false, false, &y);
  freed = 0;
  CHECK(lt_autograd_add_post_accumulate_hook(y, record, &p, count_free, &id) == LT_ERR_AUTOGRAD);
  CHECK_EQ_STR(lt_last_error(), "register_post_accumulate_grad_hook: post accumulate grad hooks cannot "
               "be registered on non-leaf tensors");
  CHECK_EQ_INT(freed, 1); /* the user data is freed on refusal */
  lt_zeros(shape, 1, LT_FLOAT64, lt_cpu(), &plain);
  CHECK(lt_autograd_add_post_accumulate_hook(plain, record, &p, NULL, &id) == LT_ERR_AUTOGRAD);
  CHECK_EQ_STR(lt_last_error(), "register_post_accumulate_grad_hook: cannot register a hook on a tensor "
               "that doesn't require gradient");
  CHECK(lt_autograd_add_post_accumulate_hook(w, NULL, &p, NULL, &id) == LT_ERR_ARG);
  CHECK(!lt_autograd_remove_post_accumulate_hook(plain, 12345));
  lt_tensor_release(y);
  lt_tensor_release(plain);
  lt_tensor_release(w);
}

static void test_reaches(void) {
  lt_tensor *a = leaf(1.0, 2), *b = leaf(1.0, 2), *c = leaf(1.0, 2), *ab = NULL, *out = NULL;
  lt_binary(LT_OP_MUL, a, b, &ab);
  lt_sum(ab, NULL, 0, false, &out);
  lt_tensor *leaves[] = {a, b, c};
  bool reached[3];
  CHECK(lt_autograd_reaches(&out, 1, leaves, 3, reached) == LT_OK);
  CHECK(reached[0] && reached[1] && !reached[2]);
  CHECK(lt_autograd_reaches(&c, 1, leaves, 3, reached) == LT_OK); /* a root that is a leaf */
  CHECK(!reached[0] && !reached[1] && reached[2]);
  lt_tensor *t[] = {a, b, c, ab, out};
  for (int i = 0; i < 5; i++) lt_tensor_release(t[i]);
}

int main(void) {
  test_once_after_all_contributions();
  test_failure_and_retained_graph();
  test_remove_inside_and_move();
  test_refusals();
  test_reaches();
  return check_summary("test_grad_hooks");
}
