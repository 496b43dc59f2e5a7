/* Automatic mixed precision (torch.autocast), per thread.
 *
 * Inside an enabled region, ops on tensors of the region's device type pick
 * their own precision: matmul, linear and conv2d run in the region's low
 * precision dtype (float16 or bfloat16: their inputs are cast), the ops
 * that need range or accuracy (exp, log, pow, reciprocal, rsqrt, sum, prod,
 * softmax, log_softmax, layer_norm and every loss) run in float32, and the
 * rest run in their inputs' dtype with the usual promotion. In-place ops are
 * never autocast. Casts are ordinary differentiable copies, so the gradient
 * of a float32 parameter comes back in float32.
 *
 * A float32 leaf that requires grad (a parameter) is cast once per region
 * while grad mode is on: the copy is cached and reused by every op of the
 * region, and the cache is dropped when the outermost region exits.
 *
 * Backward runs with autocast off (its formulas keep the forward's dtypes);
 * a region entered during backward (lt.checkpoint's recomputation) is on. */
#ifndef LT_AUTOCAST_H
#define LT_AUTOCAST_H

#include "lt/api.h"

#include <stdbool.h>
#include <stddef.h>

#include "lt/device.h"
#include "lt/dtype.h"
#include "lt/error.h"

typedef struct lt_autocast_state {
  bool enabled;
  lt_device_type device_type;
  lt_dtype dtype; /* float16 or bfloat16 */
  int depth;      /* regions entered and not yet exited */
  int suspended;  /* > 0 inside an op or a backward: nothing is autocast */
} lt_autocast_state;

/* The default low precision dtype of a device type: bfloat16 on the CPU,
 * float16 on CUDA (as PyTorch). */
LT_API lt_dtype lt_autocast_default_dtype(lt_device_type device_type);

/* This thread's state. */
LT_API lt_autocast_state lt_autocast_get(void);
/* Whether ops on device_type are autocast right now. */
LT_API bool lt_autocast_is_active(lt_device_type device_type);

/* Enters a region (enabled or, to switch autocast off inside one, not);
 * *saved receives what lt_autocast_exit restores. dtype must be float16 or
 * bfloat16. Regions nest; exit them in reverse order. */
LT_API lt_status lt_autocast_enter(bool enabled, lt_device_type device_type, lt_dtype dtype,
                            lt_autocast_state *saved);
/* Restores saved; drops the cast cache when no region is left open. */
LT_API void lt_autocast_exit(const lt_autocast_state *saved);

/* Switches autocast off until the matching resume (nests). */
LT_API void lt_autocast_suspend(void);
LT_API void lt_autocast_resume(void);

/* Autocast's policy, one rule per op it touches: the non-elementwise ops'
 * rows (ops/autocast_policy.h), then the elementwise ops marked FLOAT32 in
 * lt/ops.h. Rule i from 0; false past the last. */
typedef struct lt_autocast_rule {
  const char *op;
  bool float32;   /* in float32; else in the region's float16/bfloat16 */
  bool cuda_only; /* only in CUDA regions (a CPU region leaves the op alone) */
} lt_autocast_rule;
LT_API bool lt_autocast_rule_at(int i, lt_autocast_rule *rule);

/* Number of cached casts (for tests and memory accounting), and dropping
 * them by hand. */
LT_API size_t lt_autocast_cache_size(void);
LT_API void lt_autocast_clear_cache(void);

#endif
