/* The caching allocator proper: segments, best fit, split and merge, after
 * PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp:
 * get_free_block, alloc_block, alloc_found_block, free_block, release_block).
 *
 * Every device (the CPU included) has one lt_device_allocator in a table
 * indexed by device type and index, guarded by its own mutex. The mutex is
 * never held while the out-of-memory hook runs (see oom.c): the hook runs Lua
 * finalizers that re-enter lt_free. */
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "alloc/backend.h"
#include "alloc/poison.h"

#define NDEVICE_TYPES LT_NDEVICE_TYPES

/* ---- raw allocators per device type (and the pinned host pool) ---- */

/* Slot NDEVICE_TYPES holds the pinned pool's raw allocator. */
#define PINNED_SLOT NDEVICE_TYPES

static pthread_mutex_t backend_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_raw_allocator backends[NDEVICE_TYPES + 1];
static bool backend_installed[NDEVICE_TYPES + 1];
/* Whether a slot's backend has streams: read without the lock on every
 * allocation, so that devices without streams (the CPU) pay no lock for it. */
static atomic_bool backend_has_streams[NDEVICE_TYPES + 1];

/* The raw-allocator slot serving dev, or -1. */
static int backend_slot(lt_device dev) {
  if (dev.type == LT_DEVICE_CPU && dev.index == 1) return PINNED_SLOT;
  return (int)dev.type >= 0 && (int)dev.type < NDEVICE_TYPES ? (int)dev.type : -1;
}

/* The CPU's backend is installed on first use so that no caller has to. */
static void install_default_backend_locked(int slot) {
  if (slot == LT_DEVICE_CPU && !backend_installed[slot]) {
    backends[slot] = lt_cpu_raw_allocator();
    backend_installed[slot] = true;
  }
}

static void set_backend_slot(int slot, const lt_raw_allocator *raw) {
  pthread_mutex_lock(&backend_lock);
  if (raw) {
    backends[slot] = *raw;
    backend_installed[slot] = true;
  } else {
    memset(&backends[slot], 0, sizeof backends[slot]);
    backend_installed[slot] = false;
  }
  atomic_store(&backend_has_streams[slot], raw && raw->current_stream);
  pthread_mutex_unlock(&backend_lock);
}

void lt_alloc_set_backend(lt_device_type type, const lt_raw_allocator *raw) {
  if ((int)type < 0 || (int)type >= NDEVICE_TYPES) return;
  set_backend_slot((int)type, raw);
}

void lt_alloc_set_pinned_backend(const lt_raw_allocator *raw) { set_backend_slot(PINNED_SLOT, raw); }

static bool get_backend(lt_device dev, lt_raw_allocator *out) {
  const int slot = backend_slot(dev);
  if (slot < 0) return false;
  pthread_mutex_lock(&backend_lock);
  install_default_backend_locked(slot);
  bool ok = backend_installed[slot] && backends[slot].alloc != NULL;
  if (ok) *out = backends[slot];
  pthread_mutex_unlock(&backend_lock);
  return ok;
}

/* The stream a request on dev is for: its backend's current stream. */
static lt_stream_id current_stream(lt_device dev) {
  const int slot = backend_slot(dev);
  if (slot < 0 || !atomic_load(&backend_has_streams[slot])) return 0;
  lt_raw_allocator raw;
  return get_backend(dev, &raw) && raw.current_stream ? raw.current_stream(raw.ctx, dev.index) : 0;
}

bool lt_alloc_has_backend(lt_device dev) {
  lt_raw_allocator raw;
  return get_backend(dev, &raw);
}

bool lt_device_memory_info(lt_device dev, size_t *free_bytes, size_t *total_bytes) {
  *free_bytes = *total_bytes = 0;
  lt_raw_allocator raw;
  if (!get_backend(dev, &raw) || !raw.mem_info) return false;
  if (raw.mem_info(raw.ctx, dev.index, free_bytes, total_bytes)) return true;
  *free_bytes = *total_bytes = 0;
  return false;
}

/* ---- the per-device table ---- */

static lt_device_allocator devices[NDEVICE_TYPES][LT_MAX_DEVICES];
static pthread_once_t devices_once = PTHREAD_ONCE_INIT;

static void init_devices(void) {
  for (int t = 0; t < NDEVICE_TYPES; t++) {
    for (int i = 0; i < LT_MAX_DEVICES; i++) {
      pthread_mutex_init(&devices[t][i].lock, NULL);
      devices[t][i].dev.type = (signed char)t;
      devices[t][i].dev.index = (signed char)i;
    }
  }
}

lt_device_allocator *lt_device_allocator_of(lt_device dev) {
  if (dev.type < 0 || dev.type >= NDEVICE_TYPES || dev.index < 0 || dev.index >= LT_MAX_DEVICES)
    return NULL;
  if (dev.type == LT_DEVICE_CPU && dev.index > 1) return NULL; /* 1: the pinned pool */
  pthread_once(&devices_once, init_devices);
  return lt_estimate_shadow_of(&devices[dev.type][dev.index]);
}

/* ---- block structs, recycled per device so that splitting does not call malloc ---- */

static lt_block *new_block_struct(lt_device_allocator *da) {
  lt_block *b = da->spare_blocks;
  if (b)
    da->spare_blocks = b->next;
  else
    b = malloc(sizeof *b);
  if (b) memset(b, 0, sizeof *b);
  return b;
}

static void recycle_block_struct(lt_device_allocator *da, lt_block *b) {
  b->next = da->spare_blocks;
  da->spare_blocks = b;
}

/* ---- free blocks and the inactive_split statistics ---- */

/* A block is "split" when its segment holds other blocks too. A free split
 * block counts as inactive_split; its split state cannot change while it sits
 * in the pool (neighbours only change through merges, which take it out
 * first), so counting on entry and exit is exact. */
static bool is_split(const lt_block *b) { return b->prev != NULL || b->next != NULL; }

static void insert_free_block(lt_device_allocator *da, lt_block *b) {
  int pool = b->segment->pool;
  lt_block_tree_insert(&da->pools[pool], b);
  if (is_split(b)) {
    lt_stat_update_pool(da->stats.inactive_split, pool, 1);
    lt_stat_update_pool(da->stats.inactive_split_bytes, pool, (int64_t)b->size);
  }
}

static void remove_free_block(lt_device_allocator *da, lt_block *b) {
  int pool = b->segment->pool;
  lt_block_tree_remove(&da->pools[pool], b);
  if (is_split(b)) {
    lt_stat_update_pool(da->stats.inactive_split, pool, -1);
    lt_stat_update_pool(da->stats.inactive_split_bytes, pool, -(int64_t)b->size);
  }
}

/* ---- segments ---- */

/* Bytes the limit still allows to reserve (SIZE_MAX without a limit). */
static size_t room_below_limit(const lt_device_allocator *da) {
  size_t limit = da->stats.limit;
  size_t reserved = (size_t)da->stats.reserved_bytes[LT_POOL_ALL].current;
  if (!limit) return SIZE_MAX;
  return reserved < limit ? limit - reserved : 0;
}

/* A fresh segment of seg_size bytes holding one free block (not yet in the
 * pool), or NULL when the limit or the device says no. */
static lt_block *new_segment(lt_device_allocator *da, size_t seg_size, int pool,
                             lt_stream_id stream) {
  /* The limit caps reserved bytes, as PyTorch's per-process memory fraction. */
  if (seg_size > room_below_limit(da)) return NULL;

  lt_raw_allocator raw;
  if (da->estimate_raw)
    raw = *da->estimate_raw;
  else if (!get_backend(da->dev, &raw))
    return NULL;
  lt_segment *seg = malloc(sizeof *seg);
  lt_block *b = new_block_struct(da);
  void *mem = (seg && b) ? raw.alloc(raw.ctx, da->dev.index, seg_size) : NULL;
  if (!mem) {
    free(seg);
    if (b) recycle_block_struct(da, b);
    return NULL;
  }
  *seg = (lt_segment){.base = mem, .size = seg_size, .pool = pool, .stream = stream, .owner = da,
                      .head = b, .next = da->segments, .raw = raw};
  if (da->segments) da->segments->prev = seg;
  da->segments = seg;
  b->ptr = mem;
  b->size = seg_size;
  b->segment = seg;
  lt_poison(seg, mem, seg_size); /* no block owns any of it yet */

  da->stats.num_device_allocs++;
  lt_stat_update_pool(da->stats.segment, pool, 1);
  lt_stat_update_pool(da->stats.reserved_bytes, pool, (int64_t)seg_size);
  if (lt_history_is_on() && !lt_is_shadow(da)) lt_history_segment(seg, true);
  return b;
}

static void release_segment(lt_device_allocator *da, lt_segment *seg) {
  lt_block *b = seg->head;
  remove_free_block(da, b);
  recycle_block_struct(da, b);
  if (seg->prev)
    seg->prev->next = seg->next;
  else
    da->segments = seg->next;
  if (seg->next) seg->next->prev = seg->prev;

  if (lt_history_is_on() && !lt_is_shadow(da)) lt_history_segment(seg, false);
  lt_unpoison(seg, seg->base, seg->size); /* the system's again, for whoever gets it next */
  seg->raw.free(seg->raw.ctx, seg->owner->dev.index, seg->base, seg->size);
  da->stats.num_device_frees++;
  lt_stat_update_pool(da->stats.segment, seg->pool, -1);
  lt_stat_update_pool(da->stats.reserved_bytes, seg->pool, -(int64_t)seg->size);
  free(seg);
}

size_t lt_release_free_segments_locked(lt_device_allocator *da) {
  lt_process_pending_locked(da, true);
  size_t released = 0;
  lt_segment *seg = da->segments;
  while (seg) {
    lt_segment *next = seg->next;
    lt_block *head = seg->head;
    if (!head->allocated && head->next == NULL) { /* one free block: the whole segment */
      released += seg->size;
      release_segment(da, seg);
    }
    seg = next;
  }
  return released;
}

/* ---- allocation ---- */

/* PyTorch's should_split: the remainder must be a usable block; large blocks
 * are only split when more than 1 MiB would remain, to limit fragmentation. */
static bool should_split(int pool, size_t remaining) {
  if (pool == LT_POOL_SMALL) return remaining >= LT_MIN_BLOCK_SIZE;
  return remaining > LT_SMALL_SIZE;
}

/* Hands out free block b (already out of the pool) for a request. */
static void take_block(lt_device_allocator *da, lt_block *b, size_t rounded, size_t nbytes,
                       lt_category cat) {
  int pool = b->segment->pool;
  size_t remaining = b->size - rounded;
  if (should_split(pool, remaining)) {
    lt_block *rest = new_block_struct(da);
    if (rest) { /* without a struct the block is handed out whole: still correct */
      rest->ptr = b->ptr + rounded;
      rest->size = remaining;
      rest->segment = b->segment;
      rest->prev = b;
      rest->next = b->next;
      if (b->next) b->next->prev = rest;
      b->next = rest;
      b->size = rounded;
      insert_free_block(da, rest);
    }
  }
  b->allocated = true;
  b->requested = nbytes;
  lt_unpoison(b->segment, b->ptr, nbytes); /* not the tail up to the rounded size */
  b->category = (unsigned char)cat;
  b->origin = NULL;
  b->op = NULL;
  b->history_id = 0; /* a recycled struct must not look logged */
  b->live_prev = NULL;
  b->live_next = da->live;
  if (da->live) da->live->live_prev = b;
  da->live = b;

  lt_memory_stats *s = &da->stats;
  lt_stat_update_pool(s->allocation, pool, 1);
  lt_stat_update_pool(s->active, pool, 1);
  lt_stat_update_pool(s->allocated_bytes, pool, (int64_t)b->size);
  lt_stat_update_pool(s->active_bytes, pool, (int64_t)b->size);
  lt_stat_update_pool(s->requested_bytes, pool, (int64_t)nbytes);
  lt_stat_update(&s->category_bytes[cat], (int64_t)b->size);
  if (s->allocated_bytes[LT_POOL_ALL].current == s->allocated_bytes[LT_POOL_ALL].peak)
    for (int c = 0; c < LT_NCATEGORIES; c++) s->peak_category_bytes[c] = (size_t)s->category_bytes[c].current;
}

lt_block *lt_try_alloc_locked(lt_device_allocator *da, size_t nbytes, lt_category cat,
                              lt_stream_id stream) {
  if (nbytes > LT_MAX_REQUEST) return NULL;
  if (da->pending) lt_process_pending_locked(da, false);
  size_t rounded = lt_round_size(nbytes);
  int pool = lt_pool_for_size(rounded);
  lt_block *b = lt_block_tree_best_fit(&da->pools[pool], stream, rounded);
  if (b)
    remove_free_block(da, b);
  else
    b = new_segment(da, lt_segment_size_for(rounded), pool, stream);
  if (b) take_block(da, b, rounded, nbytes, cat);
  return b;
}

lt_block *lt_try_fallback_locked(lt_device_allocator *da, size_t nbytes, lt_category cat,
                                 lt_stream_id stream) {
  if (nbytes > LT_MAX_REQUEST) return NULL;
  size_t rounded = lt_round_size(nbytes);
  int pool = lt_pool_for_size(rounded);
  size_t usual = lt_segment_size_for(rounded);
  const size_t least = lt_fallback_segment_size(rounded);
  if (least >= usual) return NULL; /* the usual segment was already the smallest */
  size_t size = least, room = room_below_limit(da);
  if (pool == LT_POOL_SMALL && room < usual) {
    /* With less than 2 MiB below the limit no large segment fits, so that
     * room can only ever serve small requests: take it whole, so that the
     * next ones share this segment instead of each costing a device call. */
    size_t whole = room / LT_MIN_BLOCK_SIZE * LT_MIN_BLOCK_SIZE;
    if (whole > size) size = whole;
  }
  lt_block *b = new_segment(da, size, pool, stream);
  if (!b && size > least) b = new_segment(da, least, pool, stream); /* the device's refusal */
  if (!b) return NULL;
  da->stats.num_segment_fallbacks++;
  take_block(da, b, rounded, nbytes, cat);
  return b;
}

lt_block *lt_try_alloc(lt_device_allocator *da, size_t nbytes, lt_category cat,
                       lt_stream_id stream) {
  pthread_mutex_lock(&da->lock);
  lt_block *b = lt_try_alloc_locked(da, nbytes, cat, stream);
  pthread_mutex_unlock(&da->lock);
  return b;
}

/* Zero-byte requests take no memory and change no statistic (PyTorch hands out
 * a null pointer for them); the block still exists so that storages need no
 * special case, and its pointer is a real address that must not be written. */
static _Alignas(64) char zero_byte_target[64];

static lt_status alloc_zero_bytes(lt_category cat, void **ptr, lt_block **out) {
  lt_block *b = calloc(1, sizeof *b);
  if (!b) return lt_error(LT_ERR_OOM, "out of host memory for an allocator block");
  b->ptr = zero_byte_target;
  b->allocated = true;
  b->category = (unsigned char)cat;
  *ptr = b->ptr;
  *out = b;
  return LT_OK;
}

lt_status lt_alloc(lt_device dev, size_t nbytes, lt_category cat, void **ptr, lt_block **block) {
  if (!ptr || !block) return lt_error(LT_ERR_ARG, "alloc: ptr and block must not be NULL");
  *ptr = NULL;
  *block = NULL;
  if ((int)cat < 0 || (int)cat >= LT_NCATEGORIES)
    return lt_error(LT_ERR_ARG, "alloc: unknown memory category %d", (int)cat);
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) {
    char name[16];
    return lt_error(LT_ERR_DEVICE, "alloc: no such device %s", lt_device_name(dev, name));
  }
  if (nbytes == 0) return alloc_zero_bytes(cat, ptr, block);

  const lt_stream_id stream = current_stream(dev);
  lt_alloc_before(da, nbytes);
  lt_block *b = lt_try_alloc(da, nbytes, cat, stream);
  if (!b) LT_TRY(lt_alloc_slow_path(da, nbytes, cat, stream, &b));
  if (lt_history_is_on() && !lt_is_shadow(da)) lt_history_alloc(b, dev);
  *ptr = b->ptr;
  *block = b;
  return LT_OK;
}

/* ---- free ---- */

/* Merges free neighbour nb into b (PyTorch's try_merge_blocks). */
static void absorb_neighbour(lt_device_allocator *da, lt_block *b, lt_block *nb) {
  remove_free_block(da, nb);
  if (nb == b->prev) {
    b->ptr = nb->ptr;
    b->prev = nb->prev;
    if (b->prev)
      b->prev->next = b;
    else
      b->segment->head = b;
  } else {
    b->next = nb->next;
    if (b->next) b->next->prev = b;
  }
  b->size += nb->size;
  recycle_block_struct(da, nb);
}

/* As PyTorch's free: the allocation statistics drop at once, the active ones
 * only when the block is back in its pool (lt_return_block_locked), which for
 * a block used on other streams waits for their work. */
static size_t free_block_locked(lt_device_allocator *da, lt_block *b) {
  if (!b->allocated || b->pending) return 0; /* a second free of the same block: ignore */
  int pool = b->segment->pool;
  size_t size = b->size;
  lt_memory_stats *s = &da->stats;
  lt_stat_update_pool(s->allocation, pool, -1);
  lt_stat_update_pool(s->allocated_bytes, pool, -(int64_t)size);
  lt_stat_update_pool(s->requested_bytes, pool, -(int64_t)b->requested);
  lt_stat_update(&s->category_bytes[b->category], -(int64_t)size);

  if (b->live_prev)
    b->live_prev->live_next = b->live_next;
  else
    da->live = b->live_next;
  if (b->live_next) b->live_next->live_prev = b->live_prev;
  b->live_prev = b->live_next = NULL;
  b->origin = NULL;
  b->op = NULL;
  b->requested = 0;
  lt_free_with_stream_uses_locked(da, b);
  return size;
}

void lt_return_block_locked(lt_device_allocator *da, lt_block *b) {
  int pool = b->segment->pool;
  lt_stat_update_pool(da->stats.active, pool, -1);
  lt_stat_update_pool(da->stats.active_bytes, pool, -(int64_t)b->size);
  b->allocated = false;
  lt_poison(b->segment, b->ptr, b->size); /* its free neighbours already are */
  if (b->prev && !b->prev->allocated) absorb_neighbour(da, b, b->prev);
  if (b->next && !b->next->allocated) absorb_neighbour(da, b, b->next);
  insert_free_block(da, b);
}

size_t lt_free(lt_block *block) {
  if (!block) return 0;
  if (!block->segment) { /* a zero-byte block */
    free(block);
    return 0;
  }
  /* Logged before the block merges away; the caller owns it until then. */
  lt_device_allocator *da = block->segment->owner;
  if (lt_history_is_on() && block->allocated && !lt_is_shadow(da)) lt_history_free(block);
  pthread_mutex_lock(&da->lock);
  lt_block *twin = block->twin; /* an estimate's copy goes with it */
  block->twin = NULL;
  size_t size = free_block_locked(da, block);
  pthread_mutex_unlock(&da->lock);
  if (twin) lt_free(twin);
  return size;
}

size_t lt_block_size(const lt_block *block) { return block ? block->size : 0; }

/* ---- an estimate's shadow (estimate.c) ---- */

/* The copy of real segment seg in shadow s over base; false when a block
 * struct could not be made (the copy then ends at the blocks made). */
static bool clone_segment(lt_device_allocator *s, const lt_segment *seg, lt_segment *copy,
                          char *base) {
  lt_block *prev = NULL;
  for (lt_block *b = seg->head; b; b = b->next) {
    lt_block *t = new_block_struct(s);
    if (!t) return false;
    t->ptr = base + (b->ptr - seg->base);
    t->size = b->size;
    t->segment = copy;
    t->prev = prev;
    if (prev)
      prev->next = t;
    else
      copy->head = t;
    t->category = b->category;
    if (b->allocated || b->pending) {
      t->allocated = true;
      t->requested = b->requested;
      t->live_next = s->live;
      if (s->live) s->live->live_prev = t;
      s->live = t;
      b->twin = t;
    } else {
      lt_block_tree_insert(&s->pools[seg->pool], t);
    }
    prev = t;
  }
  return true;
}

bool lt_clone_cache_locked(lt_device_allocator *real, lt_device_allocator *s,
                           const lt_raw_allocator *raw) {
  for (const lt_segment *seg = real->segments; seg; seg = seg->next) {
    lt_segment *copy = malloc(sizeof *copy);
    char *base = copy ? raw->alloc(raw->ctx, real->dev.index, seg->size) : NULL;
    if (!base) {
      free(copy);
      return false;
    }
    *copy = (lt_segment){.base = base, .size = seg->size, .pool = seg->pool,
                         .stream = seg->stream, .owner = s, .next = s->segments, .raw = *raw};
    if (s->segments) s->segments->prev = copy;
    s->segments = copy;
    if (!clone_segment(s, seg, copy, base)) return false;
  }
  return true;
}

void lt_drop_twins(lt_device_allocator *real) {
  pthread_mutex_lock(&real->lock);
  for (const lt_segment *seg = real->segments; seg; seg = seg->next)
    for (lt_block *b = seg->head; b; b = b->next) {
      if (b->twin) lt_free(b->twin); /* the shadow's lock, not real's */
      b->twin = NULL;
    }
  pthread_mutex_unlock(&real->lock);
}

/* ---- cache control and limits ---- */

size_t lt_empty_cache(lt_device dev) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return 0;
  pthread_mutex_lock(&da->lock);
  size_t released = lt_release_free_segments_locked(da);
  /* The recycled block structs are a cache too: every one goes back. */
  while (da->spare_blocks) {
    lt_block *b = da->spare_blocks;
    da->spare_blocks = b->next;
    free(b);
  }
  pthread_mutex_unlock(&da->lock);
  return released;
}

void lt_set_limit(lt_device dev, size_t bytes) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return;
  pthread_mutex_lock(&da->lock);
  da->stats.limit = bytes;
  pthread_mutex_unlock(&da->lock);
}

size_t lt_get_limit(lt_device dev) {
  lt_device_allocator *da = lt_device_allocator_of(dev);
  if (!da) return 0;
  pthread_mutex_lock(&da->lock);
  size_t limit = da->stats.limit;
  pthread_mutex_unlock(&da->lock);
  return limit;
}
