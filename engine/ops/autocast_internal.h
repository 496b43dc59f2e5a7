/* The autocast policy's hook at an op's entry point:
 *
 *   if (ac_wanted(x))
 *     AC_REDISPATCH(AC_LOWER, 3, AC_LIST(x, w, b), lt_linear(ac.t[0], ac.t[1], ac.t[2], out));
 *
 * re-enters the op with its operands cast (ac.t[i]) and returns its status.
 * ac_begin casts the eligible operands (floating, not float64, on the
 * region's device) to the policy's dtype, recording the casts for autograd,
 * and suspends autocast until ac_end, so the op's own body, and any op it
 * calls, runs as written. */
#ifndef LT_OPS_AUTOCAST_INTERNAL_H
#define LT_OPS_AUTOCAST_INTERNAL_H

#include <stdbool.h>

#include "lt/autocast.h"
#include "lt/autograd.h"
#include "lt/ops.h"
#include "ops/autocast_policy.h"

typedef enum ac_policy {
  AC_LOWER,   /* the region's float16/bfloat16: matmul, linear, conv */
  AC_FLOAT32, /* float32: exp, log, pow, sums, softmax, norms, losses */
} ac_policy;

typedef enum ac_regions {
  AC_ANY,  /* CPU and CUDA regions */
  AC_CUDA, /* CUDA regions only */
} ac_regions;

/* An op's row of LT_AUTOCAST_OPS (ops/autocast_policy.h). */
typedef struct ac_row {
  const char *name;
  ac_policy policy;
  ac_regions regions;
} ac_row;

const ac_row *ac_row_of(ac_op op);
/* Whether op, whose first operand is t, is cast now: a region of a device
 * its row lists is active and t lives there. */
bool ac_op_wanted(ac_op op, const lt_tensor *t);

#define AC_MAX_OPERANDS 4

typedef struct ac_operands {
  const lt_tensor *t[AC_MAX_OPERANDS]; /* the operands to use (casts or the originals) */
  lt_tensor *owned[AC_MAX_OPERANDS];   /* the casts made, released by ac_end */
  int n;
} ac_operands;

/* Whether an op whose first operand is t is autocast now. */
bool ac_wanted(const lt_tensor *t);
/* The same for the ops of CUDA's float32 list that PyTorch's CPU list leaves
 * out (exp, log, pow, the reciprocals, sum, softmax, log_softmax,
 * layer_norm): cast only in a CUDA region; in a CPU region they run in their
 * inputs' dtype, as torch.autocast("cpu") runs them. The losses and prod are
 * on both lists (ac_wanted). */
bool ac_float32_wanted(const lt_tensor *t);
/* n (at most AC_MAX_OPERANDS) operands, NULLs allowed. On failure nothing
 * is held and autocast is not suspended. */
lt_status ac_begin(ac_operands *a, ac_policy policy, int n, const lt_tensor *const *ts);
void ac_end(ac_operands *a);

/* The entry point of an op of LT_AUTOCAST_OPS: re-enters it with its
 * operands cast when its row says so. */
#define AC_ENTRY(op, first, n, operands, call) \
  do {                                          \
    if (ac_op_wanted(op, first))                \
      AC_REDISPATCH(ac_row_of(op)->policy, n, operands, call); \
  } while (0)

#define AC_LIST(...) ((const lt_tensor *[]){__VA_ARGS__})
#define AC_REDISPATCH(policy, n, operands, call) \
  do {                                           \
    ac_operands ac;                              \
    LT_TRY(ac_begin(&ac, policy, n, operands));  \
    const lt_status ac_status = (call);          \
    ac_end(&ac);                                 \
    return ac_status;                            \
  } while (0)

#endif
