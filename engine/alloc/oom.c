/* What happens when an allocation misses both the cache and the device
 * (docs/DESIGN.md, Memory model, 4): the out-of-memory hook (a full Lua collection,
 * whose finalizers give bytes back), the cache again, then every entirely free
 * segment released and one more try, as PyTorch's malloc does with
 * release_cached_blocks; then, where PyTorch raises, a segment of the
 * request's own size; only then LT_ERR_OOM with a message that says how much
 * is allocated, reserved, allowed and stranded in cached fragments, and
 * whether the limit is reached or the free bytes are fragmented. */
#include <stdio.h>

#include "alloc/alloc_internal.h"

static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_oom_hook oom_hook;
static void *oom_hook_ud;

/* Set while this thread runs the hook: an allocation failing inside it (from a
 * finalizer) goes on without running the collection again. */
static _Thread_local bool running_hook;

static lt_oom_hook peak_hook;
static void *peak_hook_ud;

void lt_alloc_set_oom_hook(lt_oom_hook hook, void *ud) {
  pthread_mutex_lock(&hook_lock);
  oom_hook = hook;
  oom_hook_ud = ud;
  pthread_mutex_unlock(&hook_lock);
}

void lt_alloc_set_peak_hook(lt_oom_hook hook, void *ud) {
  pthread_mutex_lock(&hook_lock);
  peak_hook = hook;
  peak_hook_ud = ud;
  pthread_mutex_unlock(&hook_lock);
}

void lt_alloc_set_collect_marks(lt_device dev, size_t allocated_mark, size_t requested_mark) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return;
  pthread_mutex_lock(&da->lock);
  da->collect_mark = allocated_mark;
  da->collect_mark_requested = requested_mark;
  pthread_mutex_unlock(&da->lock);
}

static bool within_marks(const lt_device_allocator *da, size_t nbytes, size_t mark, size_t mark_requested) {
  const size_t after = (size_t)da->stats.allocated_bytes[LT_POOL_ALL].current + lt_round_size(nbytes);
  const size_t after_requested = (size_t)da->stats.requested_bytes[LT_POOL_ALL].current + nbytes;
  return !((mark != 0 && after > mark) || (mark_requested != 0 && after_requested > mark_requested));
}

bool lt_alloc_within_marks(lt_device dev, size_t nbytes, size_t allocated_mark, size_t requested_mark) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return true;
  pthread_mutex_lock(&da->lock);
  const bool within = within_marks(da, nbytes, allocated_mark, requested_mark);
  pthread_mutex_unlock(&da->lock);
  return within;
}

void lt_alloc_before(lt_device_allocator *da, size_t nbytes) {
  /* A finalizer allocating inside a collection; a request that will fail. */
  if (running_hook || nbytes > LT_MAX_REQUEST) return;
  pthread_mutex_lock(&hook_lock);
  lt_oom_hook hook = peak_hook;
  void *ud = peak_hook_ud;
  pthread_mutex_unlock(&hook_lock);
  if (!hook) return; /* the marks wait for a hook */
  pthread_mutex_lock(&da->lock);
  const bool run = !within_marks(da, nbytes, da->collect_mark, da->collect_mark_requested);
  if (run) {
    da->collect_mark = da->collect_mark_requested = 0; /* the hook sets the next ones */
    da->stats.num_peak_collections++;
  }
  pthread_mutex_unlock(&da->lock);
  if (!run) return;
  /* No lock held here: the hook's finalizers call lt_free. */
  running_hook = true;
  hook(ud, da->dev, nbytes);
  running_hook = false;
}

char *lt_format_bytes(size_t nbytes, char *buf) {
  static const char *const units[] = {"KiB", "MiB", "GiB"};
  if (nbytes < 1024) {
    snprintf(buf, 32, "%zu B", nbytes);
    return buf;
  }
  double value = (double)nbytes / 1024.0;
  int unit = 0;
  /* Move up a unit when one decimal would print 1024.0. */
  while (unit < 2 && value >= 1023.95) {
    value /= 1024.0;
    unit++;
  }
  snprintf(buf, 32, "%.1f %s", value, units[unit]);
  return buf;
}

/* Why nothing could serve a request of nbytes, from the statistics after the
 * last try: the limit really reached (even compacted, the unallocated bytes
 * under it would not hold the smallest segment for the request), or the free
 * bytes scattered (enough in total, but in blocks too small, in the other
 * pool or on another stream). Appends to buf; nothing when neither can be
 * said (no limit and too little cached: the device is full). */
static void oom_verdict(char *buf, size_t cap, size_t nbytes, const lt_memory_stats *s) {
  char need[32], rounded_buf[32], room[32];
  const size_t allocated = (size_t)s->allocated_bytes[LT_POOL_ALL].current;
  const size_t reserved = (size_t)s->reserved_bytes[LT_POOL_ALL].current;
  const size_t cached = reserved > allocated ? reserved - allocated : 0;
  const size_t rounded = nbytes <= LT_MAX_REQUEST ? lt_round_size(nbytes) : nbytes;
  const size_t fallback = nbytes <= LT_MAX_REQUEST ? lt_fallback_segment_size(rounded) : nbytes;
  lt_format_bytes(fallback, need);
  lt_format_bytes(rounded, rounded_buf);
  if (s->limit && (allocated > s->limit || s->limit - allocated < fallback)) {
    if (allocated > s->limit)
      snprintf(buf, cap, "; allocated is %s over the limit",
               lt_format_bytes(allocated - s->limit, room));
    else
      snprintf(buf, cap, "; allocated is only %s below the limit, a %s segment needed",
               lt_format_bytes(s->limit - allocated, room), need);
  } else if (s->limit && (reserved > s->limit || s->limit - reserved < fallback)) {
    /* Here reserved > allocated: the difference is cached. */
    if (reserved > s->limit)
      snprintf(buf, cap, ", but no free block of %s: fragmented (reserved is %s over the limit)",
               rounded_buf, lt_format_bytes(reserved - s->limit, room));
    else
      snprintf(buf, cap, ", but no free block of %s: fragmented (only %s unreserved below the "
               "limit, a %s segment needed)", rounded_buf,
               lt_format_bytes(s->limit - reserved, room), need);
  } else if (cached >= rounded) {
    /* The device refused the segment although the cache holds enough. */
    snprintf(buf, cap, ", but no free block of %s: fragmented", rounded_buf);
  }
}

/* Sets the LT_ERR_OOM message from a snapshot of the statistics. */
static lt_status oom_error(lt_device dev, size_t nbytes, const lt_memory_stats *s) {
  char name[16], want[32], allocated[32], reserved[32], limit[48], cached[32];
  int64_t alloc_bytes = s->allocated_bytes[LT_POOL_ALL].current;
  int64_t reserved_bytes = s->reserved_bytes[LT_POOL_ALL].current;
  lt_format_bytes((size_t)alloc_bytes, allocated);
  lt_format_bytes((size_t)reserved_bytes, reserved);
  if (s->limit) {
    char limit_bytes[32];
    snprintf(limit, sizeof limit, "limit %s", lt_format_bytes(s->limit, limit_bytes));
  } else {
    snprintf(limit, sizeof limit, "no limit");
  }
  /* Reserved but unallocated after the cache was emptied: fragmentation. */
  char fragments[64] = "";
  if (reserved_bytes > alloc_bytes)
    snprintf(fragments, sizeof fragments, ", %s free in cached blocks",
             lt_format_bytes((size_t)(reserved_bytes - alloc_bytes), cached));
  char verdict[192] = "";
  oom_verdict(verdict, sizeof verdict, nbytes, s);
  return lt_error(LT_ERR_OOM, "out of memory on %s: tried to allocate %s; %s allocated, %s reserved, %s%s%s",
                  lt_device_name(dev, name), lt_format_bytes(nbytes, want), allocated, reserved,
                  limit, fragments, verdict);
}

/* Where a real run would raise out of memory, an estimate notes the message
 * (the first one: later failures only follow from it) and goes on without a
 * limit, so that it still predicts the whole step's peak. */
static lt_status estimate_past_oom(lt_device_allocator *da, size_t nbytes, lt_category cat,
                                   lt_stream_id stream, const lt_memory_stats *snapshot,
                                   lt_block **out) {
  lt_status st = oom_error(da->dev, nbytes, snapshot);
  pthread_mutex_lock(&da->lock);
  if (da->estimate_oom[0] == '\0') snprintf(da->estimate_oom, sizeof da->estimate_oom, "%s", lt_last_error());
  da->stats.limit = 0;
  lt_block *b = lt_try_alloc_locked(da, nbytes, cat, stream);
  pthread_mutex_unlock(&da->lock);
  if (!b) return st; /* the address space ran out */
  *out = b;
  return LT_OK;
}

lt_status lt_alloc_slow_path(lt_device_allocator *da, size_t nbytes, lt_category cat,
                             lt_stream_id stream, lt_block **out) {
  lt_block *b = NULL;
  lt_memory_stats snapshot;
  if (!lt_alloc_has_backend(da->dev)) {
    char name[16];
    return lt_error(LT_ERR_DEVICE, "alloc: device %s has no memory allocator (is it available?)",
                    lt_device_name(da->dev, name));
  }

  if (nbytes <= LT_MAX_REQUEST) {
    pthread_mutex_lock(&hook_lock);
    lt_oom_hook hook = oom_hook;
    void *ud = oom_hook_ud;
    pthread_mutex_unlock(&hook_lock);
    if (hook && !running_hook) {
      pthread_mutex_lock(&da->lock);
      da->stats.num_collections++;
      pthread_mutex_unlock(&da->lock);
      /* No lock held here: the hook's finalizers call lt_free. */
      running_hook = true;
      hook(ud, da->dev, nbytes);
      running_hook = false;
      b = lt_try_alloc(da, nbytes, cat, stream);
    }
  }

  pthread_mutex_lock(&da->lock);
  if (!b && nbytes <= LT_MAX_REQUEST) {
    /* Whole free segments may be in the wrong pool, on another stream or too
     * small: give them back (after waiting for blocks pending on other
     * streams) so that a fresh segment fits under the limit. */
    lt_release_free_segments_locked(da);
    da->stats.num_alloc_retries++;
    b = lt_try_alloc_locked(da, nbytes, cat, stream);
    /* Where PyTorch gives up: the usual segment (20 MiB for a 4 MiB request)
     * does not fit, but one of the request's own size may. */
    if (!b) b = lt_try_fallback_locked(da, nbytes, cat, stream);
  }
  if (!b) {
    da->stats.num_ooms++;
    snapshot = da->stats;
  }
  pthread_mutex_unlock(&da->lock);

  if (!b && lt_is_shadow(da)) return estimate_past_oom(da, nbytes, cat, stream, &snapshot, out);
  if (!b) return oom_error(da->dev, nbytes, &snapshot);
  *out = b;
  return LT_OK;
}
