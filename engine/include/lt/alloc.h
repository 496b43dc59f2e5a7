/* The caching allocator: one design for every device (the CPU included), after
 * PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp):
 * requests round up to 512 bytes; requests of at most 1 MiB come from a small
 * pool of 2 MiB segments, larger ones from a large pool (20 MiB segments for
 * requests under 10 MiB, else the request rounded up to 2 MiB); best fit; a
 * free block is split when the remainder is at least 512 bytes (small) or more
 * than 1 MiB (large); freed blocks merge with free neighbours; empty_cache
 * gives whole free segments back to the device. Where PyTorch raises out of
 * memory because the usual segment does not fit, lt falls back to a segment
 * of the request's size (see lt_alloc).
 *
 * A device backend supplies only raw allocate/free (lt_raw_allocator). */
#ifndef LT_ALLOC_H
#define LT_ALLOC_H

#include "lt/api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lt/device.h"
#include "lt/error.h"

/* What a storage holds, so that statistics say where memory goes. */
typedef enum lt_category {
  LT_CAT_PARAMETER = 0,
  LT_CAT_GRADIENT,
  LT_CAT_OPTIMIZER,
  LT_CAT_ACTIVATION, /* saved for backward */
  LT_CAT_OTHER,
  LT_CAT_WORKSPACE, /* scratch of a call: cuBLAS, cuDNN; CPU conv2d / 16-bit linear blocks */
  LT_NCATEGORIES
} lt_category;

LT_API const char *lt_category_name(lt_category c); /* "parameter", ... */

/* A queue of device work (a CUDA stream): 0 is a device's default stream,
 * the only one a device without streams (the CPU) has. */
typedef uintptr_t lt_stream_id;

/* A device's raw memory: alloc returns NULL when the device has no room.
 * index is the device's number (N of cuda:N; 0 for the CPU, 1 for its pinned
 * pool), so that one raw allocator serves every device of its type whatever
 * device is current. */
typedef struct lt_raw_allocator {
  void *(*alloc)(void *ctx, int index, size_t nbytes);
  void (*free)(void *ctx, int index, void *ptr, size_t nbytes);
  /* The device's free and total bytes as its driver sees them (cudaMemGetInfo;
   * for the CPU, available and physical memory); false when unknown. May be
   * NULL. */
  bool (*mem_info)(void *ctx, int index, size_t *free_bytes, size_t *total_bytes);
  /* Streams, for a device that has several (all NULL: one stream, id 0).
   * The allocator tags each segment with the stream current when it was made
   * and reuses its free blocks only for requests on that stream, so stream
   * order alone keeps a reused block safe (PyTorch's per-stream pools). A
   * block also used on other streams (lt_block_record_stream) goes back to
   * its pool only when an event recorded on each of them at its free has
   * completed. */
  lt_stream_id (*current_stream)(void *ctx, int index);
  void *(*record_event)(void *ctx, int index, lt_stream_id stream); /* NULL: failed */
  bool (*event_done)(void *ctx, int index, void *event); /* non-blocking query */
  void (*event_wait)(void *ctx, int index, void *event); /* blocks until done */
  void (*event_free)(void *ctx, int index, void *event);
  void (*synchronize)(void *ctx, int index); /* whole device; when an event cannot be recorded */
  void *ctx;
} lt_raw_allocator;

/* Installs the raw allocator of a device type (the CPU's is installed by
 * default; CUDA installs its own when it starts). */
LT_API void lt_alloc_set_backend(lt_device_type type, const lt_raw_allocator *raw);

/* Page-locked ("pinned") host memory, from which a GPU copies asynchronously
 * and at full bus speed, is pooled by the same caching allocator in a slot of
 * its own: lt_pinned_pool(). Its raw allocator (cudaHostAlloc) is installed
 * by the CUDA backend; without one, pinning fails with LT_ERR_DEVICE. Tensors
 * over it are CPU tensors; the slot only keeps its bytes and statistics apart
 * (as PyTorch's CachingHostAllocator). */
static inline lt_device lt_pinned_pool(void) { lt_device d = {LT_DEVICE_CPU, 1}; return d; }
LT_API void lt_alloc_set_pinned_backend(const lt_raw_allocator *raw);

/* The free and total bytes of dev as its driver reports them (for the CPU:
 * available and physical memory), so that lt's figures can be set beside
 * nvidia-smi's; false (and zeros) when unknown. */
LT_API bool lt_device_memory_info(lt_device dev, size_t *free_bytes, size_t *total_bytes);

typedef struct lt_block lt_block; /* opaque: one allocation */

/* Called when an allocation cannot be satisfied from the cache or the device,
 * before the cache is emptied and the request retried: the bindings run a full
 * Lua collection here so that unreachable tensors give their bytes back. It
 * may free blocks (re-entering lt_free). */
typedef void (*lt_oom_hook)(void *ud, lt_device dev, size_t nbytes);
LT_API void lt_alloc_set_oom_hook(lt_oom_hook hook, void *ud);

/* The peak hook runs before an allocation that would lift dev's allocated
 * bytes (rounded blocks) above its allocated mark, or its requested bytes
 * (what callers asked for) above its requested mark; both marks are cleared
 * first, and 0 means none. The bindings collect garbage there, so that
 * tensors the script already dropped give their bytes back before they can
 * make a new peak, and set the next marks. Same rules as the out-of-memory
 * hook (it may free). */
LT_API void lt_alloc_set_peak_hook(lt_oom_hook hook, void *ud);
LT_API void lt_alloc_set_collect_marks(lt_device dev, size_t allocated_mark, size_t requested_mark);
/* Whether an allocation of nbytes on dev now stays within the given marks
 * (the test the peak hook's caller makes, with the same rounding). */
LT_API bool lt_alloc_within_marks(lt_device dev, size_t nbytes, size_t allocated_mark, size_t requested_mark);

/* Allocates nbytes (0 allowed: gives a valid block of no bytes) on dev.
 * The order: a cached block, a fresh segment of the usual size; then the
 * hook and the same again; then every entirely free segment released and the
 * same again (counted in num_alloc_retries); then a fallback segment of the
 * request's size (rounded up to 2 MiB in the large pool; in the small pool
 * what the limit leaves, up to 2 MiB), counted in num_segment_fallbacks.
 * Only then LT_ERR_OOM with the message of docs/DESIGN.md (Memory model, 4), which
 * says whether the limit is really reached ("allocated is only 2.0 MiB below
 * the limit, a 4.0 MiB segment needed") or the free cached bytes are too
 * fragmented ("8.0 MiB free in cached blocks, but no free block of 4.0 MiB:
 * fragmented (...)"). So under a limit an allocation fails only when no cached
 * block fits and limit - reserved (once free segments are released) is below
 * that fallback size. */
LT_API lt_status lt_alloc(lt_device dev, size_t nbytes, lt_category cat, void **ptr,
                   lt_block **block);
/* Returns the block to the cache; returns the bytes it gave back (its rounded
 * size, which is what `allocated` drops by). A block used on other streams
 * than its own stays out of the cache (counted in active, not in allocated)
 * until the work queued on them at this moment is done. */
LT_API size_t lt_free(lt_block *block);
/* The stream a block was allocated on, and the streams it was also used on:
 * the caller promises to record every stream other than its own on which
 * work reads or writes the block, as torch.Tensor.record_stream. Fails only
 * when the host is out of memory. */
LT_API lt_stream_id lt_block_stream(const lt_block *block);
LT_API lt_status lt_block_record_stream(lt_block *block, lt_stream_id stream);
LT_API size_t lt_block_size(const lt_block *block); /* rounded size */
LT_API void lt_block_set_category(lt_block *block, lt_category cat);
LT_API lt_category lt_block_category(const lt_block *block);
/* A short string (kept, not copied: interned by the caller) saying where the
 * block was created, e.g. "train.lua:42"; shown in out-of-memory messages and
 * added to the block's alloc event in the memory history. op (NULL: none;
 * kept too) names the library function it was made in ("nn.Conv2d:forward"),
 * for the history's alloc event. */
LT_API void lt_block_set_origin(lt_block *block, const char *origin, const char *op);

/* Releases every entirely free segment to the device; returns the bytes. */
LT_API size_t lt_empty_cache(lt_device dev);
/* Caps reserved bytes on dev; 0 removes the cap. */
LT_API void lt_set_limit(lt_device dev, size_t bytes);
LT_API size_t lt_get_limit(lt_device dev);

/* One statistic, as torch.cuda.memory_stats keeps it. */
typedef struct lt_stat {
  int64_t current, peak, allocated, freed;
} lt_stat;

enum { LT_POOL_ALL = 0, LT_POOL_SMALL, LT_POOL_LARGE, LT_NPOOLS };

typedef struct lt_memory_stats {
  lt_stat allocation[LT_NPOOLS];        /* number of live blocks */
  lt_stat segment[LT_NPOOLS];           /* number of segments from the device */
  lt_stat active[LT_NPOOLS];            /* live blocks, and freed ones still awaiting other streams */
  lt_stat inactive_split[LT_NPOOLS];    /* free blocks inside used segments */
  lt_stat allocated_bytes[LT_NPOOLS];   /* rounded bytes of live blocks */
  lt_stat reserved_bytes[LT_NPOOLS];    /* bytes of segments */
  lt_stat active_bytes[LT_NPOOLS];
  lt_stat inactive_split_bytes[LT_NPOOLS];
  lt_stat requested_bytes[LT_NPOOLS];   /* unrounded bytes asked for */
  lt_stat category_bytes[LT_NCATEGORIES]; /* allocated bytes by category */
  /* category_bytes' current values when allocated_bytes last reached its
   * peak: what the peak was made of. */
  size_t peak_category_bytes[LT_NCATEGORIES];
  int64_t num_alloc_retries;
  int64_t num_ooms;
  int64_t num_collections; /* times the oom hook ran */
  int64_t num_peak_collections; /* times the peak hook ran */
  /* Allocations served by a segment smaller than the usual one because that
   * did not fit (lt_alloc); not in PyTorch, which raises out of memory. */
  int64_t num_segment_fallbacks;
  int64_t num_device_allocs, num_device_frees; /* raw backend calls */
  size_t limit;            /* 0: none */
} lt_memory_stats;

LT_API void lt_memory_get_stats(lt_device dev, lt_memory_stats *out);
/* allocated_bytes' current value alone: cheap enough for every allocation. */
LT_API size_t lt_memory_allocated(lt_device dev);
/* requested_bytes' current value alone (the unrounded bytes asked for). */
LT_API size_t lt_memory_requested(lt_device dev);
/* Every peak becomes its current value. */
LT_API void lt_memory_reset_peak(lt_device dev);

/* The n largest live blocks on dev, largest first: sizes and origins (NULL
 * when unknown). Returns how many were written. */
LT_API int lt_memory_largest(lt_device dev, int n, size_t *sizes, const char **origins,
                      lt_category *cats);

/* Writes a byte count as out-of-memory messages show it ("512 B", "1.5 KiB",
 * "128.0 MiB", "2.0 GiB") into buf (at least 32 bytes); returns buf. */
LT_API char *lt_format_bytes(size_t nbytes, char *buf);

/* ---- estimation (engine/alloc/estimate.c) ----
 *
 * Between lt_alloc_estimate_begin and lt_alloc_estimate_end every device's
 * allocator is a shadow: the same caching allocator over address space that
 * no memory backs, starting from a copy of the real one (its segments and
 * blocks, its statistics with the peaks reset, its limit). lt_alloc, lt_free and every statistic go on
 * as in a real run (frees of real blocks count in the shadow too) while
 * nothing is allocated; lt_memory_get_stats reads the shadow. Memory handed
 * out meanwhile faults when touched: no kernel may run (lt_estimating; the
 * ops layer routes to the estimate backend). Estimates do not nest. */
LT_API lt_status lt_alloc_estimate_begin(void);
LT_API void lt_alloc_estimate_end(void);
LT_API bool lt_estimating(void);
/* Where a real run would have raised out of memory on dev, an estimate goes
 * on without the limit; this gives the message it would have raised (the
 * first), in buf. False (and "") when none. */
LT_API bool lt_alloc_estimate_oom(lt_device dev, char *buf, size_t cap);
/* A real block that the estimate counts as freed although it stays
 * allocated: a gradient dropped during the estimate that is kept to be put
 * back at its end (a real run would have given its bytes back). */
LT_API void lt_alloc_estimate_count_free(const lt_block *b);

/* ---- memory history (engine/alloc/history.c) ----
 *
 * While recording, every allocation, free and category change on any device
 * is appended to one process-wide log (one time base, so that marks line up
 * across devices; each event names its device). Blocks already live when
 * recording starts enter the log first as LT_EVENT_EXISTING, so the log alone
 * rebuilds what was allocated at any moment. Appending is amortised (the log
 * doubles); when max_events is reached later events are counted as dropped.
 * Recording off costs one predictable branch per allocation and free. */
typedef enum lt_event_kind {
  LT_EVENT_ALLOC = 0,
  LT_EVENT_FREE,
  LT_EVENT_CATEGORY, /* a live block moved from previous_category to category */
  LT_EVENT_MARK,     /* a label from lt_memory_mark; no block */
  LT_EVENT_EXISTING, /* a block already live when recording started */
  /* A segment (one raw allocation: reserved bytes) obtained or released;
   * segments held when recording starts come first as SEGMENT_ALLOC. */
  LT_EVENT_SEGMENT_ALLOC,
  LT_EVENT_SEGMENT_FREE
} lt_event_kind;

/* lt_memory_event.flags */
enum { LT_EVENT_COLLECTED = 1 }; /* a free made by the Lua collector (garbage freed) */

typedef struct lt_memory_event {
  int64_t time_ns; /* since recording started (monotonic clock) */
  uint64_t id;     /* the block, the same in its alloc, category and free events; 0 for marks */
  size_t size;     /* rounded bytes */
  size_t requested;
  const char *origin; /* the block's origin, or a mark's label (kept, not copied) */
  const char *op;     /* the library function the block was made in, or NULL */
  uint64_t segment;   /* the block's segment (its id in segment events), 0 for marks */
  size_t offset;      /* the block's place in its segment */
  lt_device device;
  unsigned char kind; /* lt_event_kind */
  unsigned char category, previous_category;
  unsigned char flags; /* LT_EVENT_COLLECTED */
} lt_memory_event;

typedef struct lt_memory_history_info {
  bool recording;
  size_t count;      /* events in the log */
  size_t dropped;    /* events not logged because the log was full */
  size_t max_events;
} lt_memory_history_info;

#define LT_HISTORY_DEFAULT_MAX_EVENTS ((size_t)1 << 20)

/* Starts a fresh log (clearing the previous one) holding at most max_events
 * (0: the default). Already recording: only max_events changes, unless the
 * recording was started as a default (below), which is then replaced by a
 * fresh log. */
LT_API lt_status lt_memory_history_start(size_t max_events);
/* Starts recording as a default (lt --memory-report): a script's own later
 * start begins a fresh log there, where it asked for one. */
LT_API lt_status lt_memory_history_start_default(void);
/* Stops appending; the log stays readable. */
LT_API void lt_memory_history_stop(void);
/* Drops the log (and stops recording). */
LT_API void lt_memory_history_clear(void);
LT_API bool lt_memory_history_recording(void);
/* Appends a mark; label is kept, not copied (interned by the caller). Does
 * nothing when not recording. */
LT_API void lt_memory_mark(const char *label);
/* Brackets a Lua collection's finalizers on the calling thread (nested calls
 * count): the frees between on and off are flagged LT_EVENT_COLLECTED. */
LT_API void lt_memory_history_collecting(bool on);
LT_API void lt_memory_history_get_info(lt_memory_history_info *out);
/* Copies up to n events starting at index first; returns how many. */
LT_API size_t lt_memory_history_read(size_t first, lt_memory_event *out, size_t n);

#endif
