/* Autocast: the per-thread region state, the cache of low precision copies
 * of parameters, the casting of an op's operands (ops/autocast_internal.h),
 * and the policy's rows (ops/autocast_policy.h), which each op's entry point
 * asks. */
#include <stdint.h>
#include <stdlib.h>

#include "lt/autocast.h"
#include "ops/autocast_internal.h"
#include "ops/op_table.h"

static _Thread_local lt_autocast_state state; /* zero: disabled, no region */

lt_dtype lt_autocast_default_dtype(lt_device_type device_type) {
  return device_type == LT_DEVICE_CUDA ? LT_FLOAT16 : LT_BFLOAT16;
}

lt_autocast_state lt_autocast_get(void) { return state; }

bool lt_autocast_is_active(lt_device_type device_type) {
  return state.enabled && state.suspended == 0 && state.device_type == device_type;
}

void lt_autocast_suspend(void) { state.suspended++; }
void lt_autocast_resume(void) {
  if (state.suspended > 0) state.suspended--;
}

/* ---- the cast cache: (source, dtype) -> cast, open addressing ----
 * A source entry holds a reference to the parameter (so its address cannot
 * be reused by another tensor while the entry lives) and to its cast, and
 * the parameter's storage version: a parameter written in place since (an
 * optimizer step inside the region) is cast again. */

typedef struct cache_entry {
  lt_tensor *source; /* NULL: empty slot */
  lt_dtype dtype;
  uint64_t version;
  lt_tensor *cast;
} cache_entry;

static _Thread_local cache_entry *cache;
static _Thread_local size_t cache_cap, cache_used;

static size_t slot_of(const lt_tensor *source, lt_dtype dtype, size_t cap) {
  uintptr_t h = (uintptr_t)source >> 4;
  h ^= (uintptr_t)dtype * 0x9e3779b9u;
  h *= 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 17) & (cap - 1);
}

static cache_entry *cache_find(const lt_tensor *source, lt_dtype dtype) {
  if (!cache) return NULL;
  for (size_t i = slot_of(source, dtype, cache_cap);; i = (i + 1) & (cache_cap - 1)) {
    cache_entry *e = &cache[i];
    if (!e->source) return NULL;
    if (e->source == source && e->dtype == dtype) return e;
  }
}

/* Room for one more entry (the table stays at most half full). */
static bool cache_reserve(void) {
  if (2 * (cache_used + 1) <= cache_cap) return true;
  size_t cap = cache_cap ? 2 * cache_cap : 64;
  cache_entry *grown = calloc(cap, sizeof *grown);
  if (!grown) return false;
  for (size_t k = 0; k < cache_cap; k++) {
    if (!cache[k].source) continue;
    size_t i = slot_of(cache[k].source, cache[k].dtype, cap);
    while (grown[i].source) i = (i + 1) & (cap - 1);
    grown[i] = cache[k];
  }
  free(cache);
  cache = grown;
  cache_cap = cap;
  return true;
}

size_t lt_autocast_cache_size(void) { return cache_used; }

void lt_autocast_clear_cache(void) {
  for (size_t k = 0; k < cache_cap; k++) {
    if (!cache[k].source) continue;
    lt_tensor_release(cache[k].cast);
    lt_tensor_release(cache[k].source);
  }
  free(cache);
  cache = NULL;
  cache_cap = cache_used = 0;
}

/* ---- regions ---- */

lt_status lt_autocast_enter(bool enabled, lt_device_type device_type, lt_dtype dtype,
                            lt_autocast_state *saved) {
  if (dtype != LT_FLOAT16 && dtype != LT_BFLOAT16)
    return lt_error(LT_ERR_DTYPE, "autocast: dtype must be float16 or bfloat16, got %s",
                    lt_dtype_name(dtype));
  if (device_type != LT_DEVICE_CPU && device_type != LT_DEVICE_CUDA)
    return lt_error(LT_ERR_DEVICE, "autocast: unknown device type %d", (int)device_type);
  *saved = state;
  state.enabled = enabled;
  state.device_type = device_type;
  state.dtype = dtype;
  state.depth++;
  state.suspended = 0; /* an explicit region overrides a suspension (inside backward) */
  return LT_OK;
}

void lt_autocast_exit(const lt_autocast_state *saved) {
  state = *saved;
  if (state.depth == 0) lt_autocast_clear_cache();
}

/* ---- operands ---- */

/* Autocast casts floating tensors of the region's device, except float64
 * (PyTorch's is_eligible). */
static bool eligible(const lt_tensor *t) {
  return t && t->storage && t->refcount > 0 && (lt_device_type)t->storage->device.type == state.device_type &&
         lt_dtype_is_floating(t->dtype) && t->dtype != LT_FLOAT64;
}

/* A parameter cast to the region's low precision: the copy is shared by the
 * region's ops. Only while grad mode is on, so that a cached copy always
 * carries its link to the parameter. */
static bool cacheable(const lt_tensor *t, lt_dtype dt) {
  return dt == state.dtype && t->dtype == LT_FLOAT32 && t->requires_grad && lt_is_leaf(t) &&
         lt_is_grad_enabled();
}

static lt_status cast_operand(const lt_tensor *t, lt_dtype dt, lt_tensor **out) {
  *out = NULL;
  if (!eligible(t) || t->dtype == dt) return LT_OK;
  const bool use_cache = cacheable(t, dt);
  cache_entry *e = use_cache ? cache_find(t, dt) : NULL;
  if (e && e->version == t->storage->version) {
    lt_tensor_retain(e->cast);
    *out = e->cast;
    return LT_OK;
  }
  LT_TRY(lt_to_dtype(t, dt, false, out));
  if (e) { /* stale: the parameter changed since it was cast */
    lt_tensor_release(e->cast);
    e->cast = *out;
    e->version = t->storage->version;
    lt_tensor_retain(*out);
  } else if (use_cache && cache_reserve()) {
    size_t i = slot_of(t, dt, cache_cap);
    while (cache[i].source) i = (i + 1) & (cache_cap - 1);
    lt_tensor_retain((lt_tensor *)t);
    lt_tensor_retain(*out);
    cache[i] = (cache_entry){(lt_tensor *)t, dt, t->storage->version, *out};
    cache_used++;
  } /* no room for an entry: the copy is used uncached */
  return LT_OK;
}

bool ac_wanted(const lt_tensor *t) {
  return state.enabled && state.suspended == 0 && t && t->storage && t->refcount > 0 &&
         (lt_device_type)t->storage->device.type == state.device_type;
}

bool ac_float32_wanted(const lt_tensor *t) { return state.device_type == LT_DEVICE_CUDA && ac_wanted(t); }

static const ac_row rows[AC_OP_COUNT] = {
#define LT_AC_ROW(ID, name, policy, regions) [AC_OP_##ID] = {#name, AC_##policy, AC_##regions},
    LT_AUTOCAST_OPS(LT_AC_ROW)
#undef LT_AC_ROW
};

const ac_row *ac_row_of(ac_op op) { return (unsigned)op < AC_OP_COUNT ? &rows[op] : NULL; }

bool lt_autocast_rule_at(int i, lt_autocast_rule *rule) {
  if (i < 0) return false;
  if (i < AC_OP_COUNT) {
    *rule = (lt_autocast_rule){rows[i].name, rows[i].policy == AC_FLOAT32, rows[i].regions == AC_CUDA};
    return true;
  }
  /* The elementwise rows' FLOAT32 column is PyTorch's CUDA float32 list. */
  int k = i - AC_OP_COUNT;
  for (int op = 0; op < LT_NUNARY; op++) {
    const ops_unary_row *row = ops_unary_row_of((lt_unary_op)op);
    if (row->autocast_float32 && k-- == 0) {
      *rule = (lt_autocast_rule){row->name, true, true};
      return true;
    }
  }
  for (int op = 0; op < LT_NBINARY; op++) {
    const ops_binary_row *row = ops_binary_row_of((lt_binary_op)op);
    if (row->autocast_float32 && k-- == 0) {
      *rule = (lt_autocast_rule){row->name, true, true};
      return true;
    }
  }
  return false;
}

bool ac_op_wanted(ac_op op, const lt_tensor *t) {
  const ac_row *row = ac_row_of(op);
  if (row == NULL) return false;
  return row->regions == AC_CUDA ? ac_float32_wanted(t) : ac_wanted(t);
}

lt_status ac_begin(ac_operands *a, ac_policy policy, int n, const lt_tensor *const *ts) {
  const lt_dtype dt = policy == AC_LOWER ? state.dtype : LT_FLOAT32;
  a->n = n;
  for (int i = 0; i < n; i++) {
    a->owned[i] = NULL;
    a->t[i] = ts[i];
  }
  /* Last operand first, as PyTorch's casts run (its wrapper's argument
   * pack, which GCC evaluates right to left): the first operand's cast is
   * then the newest node, and the backward, which runs the newest ready node
   * first, widens the input's and the weight's gradients before the bias's,
   * so the small one stays 16-bit while the large one is widened (a small
   * model's peak under autocast). */
  for (int i = n - 1; i >= 0; i--) {
    lt_status st = cast_operand(ts[i], dt, &a->owned[i]);
    if (st != LT_OK) {
      for (int k = i + 1; k < n; k++)
        if (a->owned[k]) lt_tensor_release(a->owned[k]);
      return st;
    }
    if (a->owned[i]) a->t[i] = a->owned[i];
  }
  lt_autocast_suspend();
  return LT_OK;
}

void ac_end(ac_operands *a) {
  lt_autocast_resume();
  for (int i = 0; i < a->n; i++)
    if (a->owned[i]) lt_tensor_release(a->owned[i]);
}
