/* Private state of the caching allocator, shared by the files of engine/alloc.
 *
 * The rules follow PyTorch's CUDA caching allocator
 * (c10/cuda/CUDACachingAllocator.cpp): sizes round to 512 bytes; two pools;
 * each segment (one raw allocation) is cut into blocks kept in an
 * address-ordered doubly linked list so that a freed block can merge with its
 * free neighbours; free blocks of a pool sit in a tree ordered by
 * (size, address) so that best fit is a logarithmic search. */
#ifndef LT_ALLOC_INTERNAL_H
#define LT_ALLOC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lt/alloc.h"

/* PyTorch's constants (kMinBlockSize, kSmallSize, kSmallBuffer, kLargeBuffer,
 * kMinLargeAlloc, kRoundLarge). */
#define LT_MIN_BLOCK_SIZE ((size_t)512)
#define LT_SMALL_SIZE ((size_t)1 << 20)     /* largest request of the small pool */
#define LT_SMALL_BUFFER ((size_t)2 << 20)   /* segment size of the small pool */
#define LT_LARGE_BUFFER ((size_t)20 << 20)  /* segment for large requests under ... */
#define LT_MIN_LARGE_ALLOC ((size_t)10 << 20) /* ... this size */
#define LT_ROUND_LARGE ((size_t)2 << 20)    /* larger requests round to this */
/* Requests above this cannot be rounded without overflow: they fail at once. */
#define LT_MAX_REQUEST (SIZE_MAX / 4)

typedef struct lt_segment lt_segment;
typedef struct lt_device_allocator lt_device_allocator;

struct lt_block {
  char *ptr;
  size_t size;      /* rounded; 0 only for zero-byte blocks */
  size_t requested; /* what the caller asked for (requested_bytes) */
  lt_segment *segment; /* NULL for zero-byte blocks, which own no memory */
  lt_block *prev, *next; /* address-ordered neighbours in the segment */
  /* While free: node of the pool's tree. */
  lt_block *left, *right;
  uint32_t priority;
  /* While allocated: the device's list of live blocks (lt_memory_largest). */
  lt_block *live_prev, *live_next;
  bool allocated;
  unsigned char category; /* lt_category */
  const char *origin;
  const char *op; /* the library function it was made in (lt_block_set_origin) */
  /* While recording (history.c): the block's id in the log (0 or from an
   * earlier recording: not logged) and the index of its alloc event. */
  uint64_t history_id;
  size_t history_event;
  /* streams.c. While allocated: the streams other than its segment's on which
   * the block was used (lt_block_record_stream). Once freed with such uses:
   * pending (out of the live list, not yet back in the pool) until the events
   * recorded on them complete; pending blocks are linked by pending_next. */
  lt_stream_id *uses;
  void **events;
  int nuses, uses_cap, nevents;
  bool pending;
  lt_block *pending_next;
  /* estimate.c: while an estimate runs, an allocated block's copy in its
   * allocator's shadow (freed there when this one is freed). */
  lt_block *twin;
};

struct lt_segment {
  char *base;
  size_t size;
  int pool; /* LT_POOL_SMALL or LT_POOL_LARGE */
  lt_stream_id stream; /* every block of the segment serves this stream only */
  lt_device_allocator *owner;
  lt_block *head; /* first block by address */
  lt_segment *prev, *next; /* the device's segments */
  /* The backend that gave the memory, kept so that it goes back to the same
   * one even if the backend is replaced later. */
  lt_raw_allocator raw;
  uint64_t history_id; /* as a block's (history.c) */
};

/* Free blocks of one pool, ordered by (stream, size, address). */
typedef struct lt_block_tree {
  lt_block *root;
} lt_block_tree;

struct lt_device_allocator {
  pthread_mutex_t lock;
  lt_device dev;
  lt_block_tree pools[LT_NPOOLS]; /* indexed by LT_POOL_SMALL / LT_POOL_LARGE */
  lt_segment *segments;
  lt_block *live;          /* allocated blocks */
  lt_block *spare_blocks;  /* recycled block structs (linked by next) */
  lt_block *pending;       /* freed blocks waiting for other streams (streams.c) */
  lt_memory_stats stats;   /* stats.limit is the limit */
  /* The peak hook runs above either (0: never): allocated bytes, requested. */
  size_t collect_mark, collect_mark_requested;
  /* estimate.c: set on a shadow only: the reservations its segments come
   * from, the allocator it shadows, and its link among kept shadows. */
  const lt_raw_allocator *estimate_raw;
  lt_device_allocator *real;
  lt_device_allocator *kept_next;
  char estimate_oom[512]; /* the out-of-memory a real run would have raised ("": none) */
};

/* block_tree.c */
void lt_block_tree_insert(lt_block_tree *tree, lt_block *block);
void lt_block_tree_remove(lt_block_tree *tree, lt_block *block);
/* The smallest free block of stream with at least size bytes (lowest address
 * on ties), or NULL. */
lt_block *lt_block_tree_best_fit(const lt_block_tree *tree, lt_stream_id stream, size_t size);
static inline lt_stream_id lt_block_stream_of(const lt_block *b) { return b->segment->stream; }

/* caching.c */
/* The allocator of dev, or NULL when dev is not a valid device slot. */
lt_device_allocator *lt_device_allocator_of(lt_device dev);
/* One attempt on stream: the cache, then a fresh segment within the limit.
 * Returns NULL when neither has room. The _locked form expects the caller to
 * hold da->lock. */
lt_block *lt_try_alloc(lt_device_allocator *da, size_t nbytes, lt_category cat,
                       lt_stream_id stream);
lt_block *lt_try_alloc_locked(lt_device_allocator *da, size_t nbytes, lt_category cat,
                              lt_stream_id stream);
/* The last resort before out of memory, right after a failed retry (the
 * cache was just searched): a segment smaller than the usual one, of
 * lt_fallback_segment_size bytes (small pool: up to what the limit leaves,
 * below 2 MiB), counted in num_segment_fallbacks. NULL when it does not fit
 * either, or when the usual segment was no larger. */
lt_block *lt_try_fallback_locked(lt_device_allocator *da, size_t nbytes, lt_category cat,
                                 lt_stream_id stream);
/* Puts a freed block (already out of the live list and the allocation
 * statistics) back into its pool, merged with free neighbours. */
void lt_return_block_locked(lt_device_allocator *da, lt_block *b);
/* Whether a device type has a raw allocator (the CPU always does). */
bool lt_alloc_has_backend(lt_device dev);
/* Waits for every pending block, then releases every entirely free segment;
 * the caller holds the lock. */
size_t lt_release_free_segments_locked(lt_device_allocator *da);

/* estimate.c. The allocator that serves real's device now: its shadow while
 * an estimate runs (made on first use), else real itself. */
lt_device_allocator *lt_estimate_shadow_of(lt_device_allocator *real);
/* caching.c, for estimate.c. Copies real's segments and blocks into shadow
 * over address space from raw: the same sizes and offsets, free blocks in
 * the shadow's pools, each allocated block's copy allocated and recorded as
 * its twin. Both locks held; false when the host ran out of memory (shadow
 * then holds what was copied). */
bool lt_clone_cache_locked(lt_device_allocator *real, lt_device_allocator *shadow,
                           const lt_raw_allocator *raw);
/* Frees, in their shadow, the twins of real's blocks and forgets them. */
void lt_drop_twins(lt_device_allocator *real);
static inline bool lt_is_shadow(const lt_device_allocator *da) { return da->real != NULL; }

/* stats.c: an update of one statistic, as PyTorch's update_stat. */
void lt_stat_update(lt_stat *stat, int64_t delta);
/* Updates the ALL entry and the pool's entry of a per-pool statistic. */
void lt_stat_update_pool(lt_stat *stats, int pool, int64_t delta);

/* oom.c: after lt_try_alloc failed: the hook, the cache emptied, retries, and
 * finally the LT_ERR_OOM message. Called without the lock. */
lt_status lt_alloc_slow_path(lt_device_allocator *da, size_t nbytes, lt_category cat,
                             lt_stream_id stream, lt_block **out);
/* oom.c: before an allocation of nbytes: the peak hook when it would lift
 * allocated above the collect mark. Called without the lock. */
void lt_alloc_before(lt_device_allocator *da, size_t nbytes);

/* streams.c, all with da->lock held. After the statistics of a free: either
 * returns b to its pool, or, when it was used on other streams, records an
 * event on each and makes it pending. */
void lt_free_with_stream_uses_locked(lt_device_allocator *da, lt_block *b);
/* Returns to the pool every pending block whose events have completed; with
 * wait, waits for all of them first (empty_cache, the out-of-memory path). */
void lt_process_pending_locked(lt_device_allocator *da, bool wait);

/* history.c: the event log. The switch is read on every allocation and free;
 * the calls below are made only when it is on. */
extern atomic_bool lt_history_on;
static inline bool lt_history_is_on(void) {
  return atomic_load_explicit(&lt_history_on, memory_order_relaxed);
}
void lt_history_alloc(lt_block *block, lt_device dev);
void lt_history_free(lt_block *block);
/* Called with the device's lock held (the lock order is device, then log). */
void lt_history_category(lt_block *block, lt_category previous);
void lt_history_origin(lt_block *block);
/* A segment obtained (alloc) or about to be released; the device's lock is held. */
void lt_history_segment(lt_segment *seg, bool alloc);

/* Rounding rules (PyTorch's round_size and get_allocation_size). */
static inline size_t lt_round_size(size_t nbytes) {
  if (nbytes < LT_MIN_BLOCK_SIZE) return LT_MIN_BLOCK_SIZE;
  return (nbytes + LT_MIN_BLOCK_SIZE - 1) / LT_MIN_BLOCK_SIZE * LT_MIN_BLOCK_SIZE;
}
static inline int lt_pool_for_size(size_t rounded) {
  return rounded <= LT_SMALL_SIZE ? LT_POOL_SMALL : LT_POOL_LARGE;
}
static inline size_t lt_segment_size_for(size_t rounded) {
  if (rounded <= LT_SMALL_SIZE) return LT_SMALL_BUFFER;
  if (rounded < LT_MIN_LARGE_ALLOC) return LT_LARGE_BUFFER;
  return (rounded + LT_ROUND_LARGE - 1) / LT_ROUND_LARGE * LT_ROUND_LARGE;
}
/* The smallest segment that can serve a request (lt's fallback, where PyTorch
 * would raise out of memory): the request itself, a large one rounded up to
 * 2 MiB. An allocation fails only when, after the retry, no cached block
 * fits and this much is not left below the limit (or the device refuses). */
static inline size_t lt_fallback_segment_size(size_t rounded) {
  if (rounded <= LT_SMALL_SIZE) return rounded;
  return (rounded + LT_ROUND_LARGE - 1) / LT_ROUND_LARGE * LT_ROUND_LARGE;
}

#endif
