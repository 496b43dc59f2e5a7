/* Allocator statistics with torch.cuda.memory_stats semantics (PyTorch's
 * DeviceStats and update_stat): every statistic keeps current, peak, and the
 * running totals of increases (allocated) and decreases (freed). Also the
 * per-category accounting and the largest live blocks for OOM messages. */
#include <string.h>

#include "alloc/alloc_internal.h"

void lt_stat_update(lt_stat *stat, int64_t delta) {
  stat->current += delta;
  if (stat->current > stat->peak) stat->peak = stat->current;
  if (delta > 0)
    stat->allocated += delta;
  else
    stat->freed -= delta;
}

void lt_stat_update_pool(lt_stat *stats, int pool, int64_t delta) {
  lt_stat_update(&stats[LT_POOL_ALL], delta);
  lt_stat_update(&stats[pool], delta);
}

void lt_memory_get_stats(lt_device dev, lt_memory_stats *out) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) {
    memset(out, 0, sizeof *out);
    return;
  }
  pthread_mutex_lock(&da->lock);
  *out = da->stats;
  pthread_mutex_unlock(&da->lock);
}

size_t lt_memory_allocated(lt_device dev) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return 0;
  pthread_mutex_lock(&da->lock);
  const int64_t n = da->stats.allocated_bytes[LT_POOL_ALL].current;
  pthread_mutex_unlock(&da->lock);
  return (size_t)n;
}

size_t lt_memory_requested(lt_device dev) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return 0;
  pthread_mutex_lock(&da->lock);
  const int64_t n = da->stats.requested_bytes[LT_POOL_ALL].current;
  pthread_mutex_unlock(&da->lock);
  return (size_t)n;
}

static void reset_peaks(lt_stat *stats, int n) {
  for (int i = 0; i < n; i++) stats[i].peak = stats[i].current;
}

void lt_memory_reset_peak(lt_device dev) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return;
  pthread_mutex_lock(&da->lock);
  lt_memory_stats *s = &da->stats;
  reset_peaks(s->allocation, LT_NPOOLS);
  reset_peaks(s->segment, LT_NPOOLS);
  reset_peaks(s->active, LT_NPOOLS);
  reset_peaks(s->inactive_split, LT_NPOOLS);
  reset_peaks(s->allocated_bytes, LT_NPOOLS);
  reset_peaks(s->reserved_bytes, LT_NPOOLS);
  reset_peaks(s->active_bytes, LT_NPOOLS);
  reset_peaks(s->inactive_split_bytes, LT_NPOOLS);
  reset_peaks(s->requested_bytes, LT_NPOOLS);
  reset_peaks(s->category_bytes, LT_NCATEGORIES);
  for (int c = 0; c < LT_NCATEGORIES; c++) s->peak_category_bytes[c] = (size_t)s->category_bytes[c].current;
  pthread_mutex_unlock(&da->lock);
}

/* ---- categories and origins ---- */

const char *lt_category_name(lt_category c) {
  switch (c) {
    case LT_CAT_PARAMETER: return "parameter";
    case LT_CAT_GRADIENT: return "gradient";
    case LT_CAT_OPTIMIZER: return "optimizer";
    case LT_CAT_ACTIVATION: return "activation";
    case LT_CAT_OTHER: return "other";
    case LT_CAT_WORKSPACE: return "workspace";
    case LT_NCATEGORIES: break;
  }
  return "unknown";
}

void lt_block_set_category(lt_block *block, lt_category cat) {
  if (!block || (int)cat < 0 || (int)cat >= LT_NCATEGORIES) return;
  if (!block->segment) { /* zero-byte blocks carry no bytes to move */
    block->category = (unsigned char)cat;
    return;
  }
  lt_device_allocator *da = block->segment->owner;
  pthread_mutex_lock(&da->lock);
  lt_category previous = (lt_category)block->category;
  block->category = (unsigned char)cat;
  if (block->allocated && previous != cat) {
    lt_stat_update(&da->stats.category_bytes[previous], -(int64_t)block->size);
    lt_stat_update(&da->stats.category_bytes[cat], (int64_t)block->size);
    if (lt_history_is_on() && !lt_is_shadow(da)) lt_history_category(block, previous);
  }
  lt_block *twin = block->twin; /* an estimate's copy moves with it */
  pthread_mutex_unlock(&da->lock);
  if (twin) lt_block_set_category(twin, cat);
}

lt_category lt_block_category(const lt_block *block) {
  return block ? (lt_category)block->category : LT_CAT_OTHER;
}

void lt_block_set_origin(lt_block *block, const char *origin, const char *op) {
  if (!block) return;
  block->origin = origin;
  block->op = op;
  /* The origin arrives just after the allocation: complete its event. */
  if (lt_history_is_on() && block->segment) lt_history_origin(block);
}

/* ---- the largest live blocks ---- */

int lt_memory_largest(lt_device dev, int n, size_t *sizes, const char **origins,
                      lt_category *cats) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da || n <= 0 || !sizes) return 0;
  int count = 0;
  pthread_mutex_lock(&da->lock);
  /* Insertion into a sorted top-n: n is small (a few lines of a message). */
  for (const lt_block *b = da->live; b; b = b->live_next) {
    if (count == n && b->size <= sizes[n - 1]) continue;
    int i = count < n ? count++ : n - 1;
    while (i > 0 && sizes[i - 1] < b->size) {
      sizes[i] = sizes[i - 1];
      if (origins) origins[i] = origins[i - 1];
      if (cats) cats[i] = cats[i - 1];
      i--;
    }
    sizes[i] = b->size;
    if (origins) origins[i] = b->origin;
    if (cats) cats[i] = (lt_category)b->category;
  }
  pthread_mutex_unlock(&da->lock);
  return count;
}
