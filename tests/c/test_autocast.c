/* Tests of the engine's autocast: region nesting and its state, the op
 * policy (low precision, float32, untouched), the parameter cast cache and
 * its release at the outermost exit, float32 gradients through the casts,
 * autocast off during backward, and nothing left allocated. */
#include "check.h"
#include "lt/lt.h"

static int64_t allocated_now(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  return s.allocated_bytes[LT_POOL_ALL].current;
}

static lt_tensor *filled(int64_t rows, int64_t cols, double value, bool grad) {
  lt_tensor *t = NULL;
  const int64_t shape[2] = {rows, cols};
  if (lt_empty(shape, 2, LT_FLOAT32, lt_cpu(), &t) != LT_OK) return NULL;
  lt_fill_(t, value);
  if (grad) lt_requires_grad_(t, true);
  return t;
}

static void test_regions(void) {
  lt_autocast_state outer, inner;
  CHECK(!lt_autocast_is_active(LT_DEVICE_CPU));
  CHECK_EQ_INT(lt_autocast_enter(true, LT_DEVICE_CPU, LT_BFLOAT16, &outer), LT_OK);
  CHECK(lt_autocast_is_active(LT_DEVICE_CPU));
  CHECK(!lt_autocast_is_active(LT_DEVICE_CUDA));
  CHECK_EQ_INT(lt_autocast_enter(false, LT_DEVICE_CPU, LT_BFLOAT16, &inner), LT_OK);
  CHECK(!lt_autocast_is_active(LT_DEVICE_CPU));
  CHECK_EQ_INT(lt_autocast_get().depth, 2);
  lt_autocast_exit(&inner);
  CHECK(lt_autocast_is_active(LT_DEVICE_CPU));
  lt_autocast_suspend();
  CHECK(!lt_autocast_is_active(LT_DEVICE_CPU));
  lt_autocast_resume();
  lt_autocast_exit(&outer);
  CHECK(!lt_autocast_is_active(LT_DEVICE_CPU));
  CHECK_EQ_INT(lt_autocast_get().depth, 0);
  CHECK_EQ_INT(lt_autocast_enter(true, LT_DEVICE_CPU, LT_FLOAT32, &outer), LT_ERR_DTYPE);
  CHECK_EQ_INT(lt_autocast_default_dtype(LT_DEVICE_CPU), LT_BFLOAT16);
  CHECK_EQ_INT(lt_autocast_default_dtype(LT_DEVICE_CUDA), LT_FLOAT16);
}

static void test_policy_cache_and_grads(void) {
  const int64_t before = allocated_now();
  lt_tensor *x = filled(2, 3, 0.5, false), *w = filled(4, 3, 0.25, true);
  lt_tensor *y1 = NULL, *y2 = NULL, *soft = NULL, *mean = NULL, *loss = NULL, *sum2 = NULL, *prod = NULL;
  lt_autocast_state saved;
  CHECK_EQ_INT(lt_autocast_enter(true, LT_DEVICE_CPU, LT_FLOAT16, &saved), LT_OK);
  CHECK_EQ_INT(lt_linear(x, w, NULL, &y1), LT_OK);
  CHECK_EQ_INT(y1->dtype, LT_FLOAT16);
  CHECK_EQ_INT(lt_autocast_cache_size(), 1);
  CHECK_EQ_INT(lt_linear(x, w, NULL, &y2), LT_OK);
  CHECK_EQ_INT(lt_autocast_cache_size(), 1); /* w was cast once */
  /* PyTorch's CPU list: softmax and sum run in their input's dtype there
   * (only a CUDA region casts them to float32); prod is float32 on both. */
  CHECK_EQ_INT(lt_softmax(y1, 1, &soft), LT_OK);
  CHECK_EQ_INT(soft->dtype, LT_FLOAT16);
  CHECK_EQ_INT(lt_mean(y2, NULL, 0, false, &mean), LT_OK);
  CHECK_EQ_INT(mean->dtype, LT_FLOAT16); /* not in a list: the input's dtype */
  CHECK_EQ_INT(lt_sum(soft, NULL, 0, false, &loss), LT_OK);
  CHECK_EQ_INT(loss->dtype, LT_FLOAT16);
  CHECK_EQ_INT(lt_prod(y2, NULL, 0, false, &prod), LT_OK);
  CHECK_EQ_INT(prod->dtype, LT_FLOAT32);
  CHECK_EQ_INT(lt_sum(y2, NULL, 0, false, &sum2), LT_OK);
  CHECK_EQ_INT(sum2->dtype, LT_FLOAT16);
  /* Backward inside the region runs without autocast and reaches w in float32. */
  CHECK_EQ_INT(lt_backward(sum2, NULL, false), LT_OK);
  lt_autocast_exit(&saved);
  CHECK_EQ_INT(lt_autocast_cache_size(), 0);
  lt_tensor *g = w->grad;
  CHECK(g != NULL);
  if (g) {
    CHECK_EQ_INT(g->dtype, LT_FLOAT32);
    double v = 0;
    lt_tensor *first = NULL;
    CHECK_EQ_INT(lt_select(g, 0, 0, &first), LT_OK);
    lt_tensor *e = NULL;
    CHECK_EQ_INT(lt_select(first, 0, 0, &e), LT_OK);
    CHECK_EQ_INT(lt_item(e, &v), LT_OK);
    CHECK(v == 1.0); /* d(sum of y)/dw = sum over the 2 rows of x = 2 * 0.5 */
    lt_tensor_release(e);
    lt_tensor_release(first);
  }
  lt_tensor *all[] = {x, w, y1, y2, soft, mean, loss, sum2, prod};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lt_tensor_release(all[i]);
  CHECK_EQ_INT(allocated_now(), before);
}

int main(void) {
  test_regions();
  test_policy_cache_and_grads();
  return check_summary("test_autocast");
}
