/* Blocks used on more than one stream, after PyTorch's record_stream,
 * insert_events and process_events (c10/cuda/CUDACachingAllocator.cpp).
 *
 * A block is reused only by requests on the stream it was allocated on
 * (caching.c), so work on that stream needs no event: it runs in order. Work
 * on another stream does not; a caller that queues such work records the
 * stream on the block. When the block is freed, an event is recorded on each
 * such stream and the block waits, counted as active but not allocated,
 * until all have completed. Pending blocks are checked at every allocation of
 * their device, and waited for when the cache is emptied. */
#include <stdlib.h>

#include "alloc/alloc_internal.h"

lt_stream_id lt_block_stream(const lt_block *block) {
  return block && block->segment ? lt_block_stream_of(block) : 0;
}

lt_status lt_block_record_stream(lt_block *block, lt_stream_id stream) {
  /* A zero-byte block owns no memory; a use on its own stream is in order. */
  if (!block || !block->segment || stream == lt_block_stream_of(block)) return LT_OK;
  lt_device_allocator *da = block->segment->owner;
  lt_status st = LT_OK;
  pthread_mutex_lock(&da->lock);
  bool known = false;
  for (int i = 0; i < block->nuses && !known; i++) known = block->uses[i] == stream;
  if (!known && block->allocated && !block->pending) {
    if (block->nuses == block->uses_cap) {
      int cap = block->uses_cap ? 2 * block->uses_cap : 4;
      lt_stream_id *uses = realloc(block->uses, (size_t)cap * sizeof *uses);
      if (!uses) st = lt_error(LT_ERR_OOM, "record_stream: out of host memory for the stream list");
      else {
        block->uses = uses;
        block->uses_cap = cap;
      }
    }
    if (st == LT_OK) block->uses[block->nuses++] = stream;
  }
  pthread_mutex_unlock(&da->lock);
  return st;
}

static void forget_uses(lt_block *b) {
  free(b->uses);
  free(b->events);
  b->uses = NULL;
  b->events = NULL;
  b->nuses = b->uses_cap = b->nevents = 0;
}

static void free_events(const lt_raw_allocator *raw, int index, lt_block *b) {
  for (int i = 0; i < b->nevents; i++)
    if (b->events[i] && raw->event_free) raw->event_free(raw->ctx, index, b->events[i]);
}

void lt_free_with_stream_uses_locked(lt_device_allocator *da, lt_block *b) {
  const lt_raw_allocator *raw = &b->segment->raw;
  const int index = da->dev.index;
  if (b->nuses == 0) {
    lt_return_block_locked(da, b);
    return;
  }
  bool recorded = raw->record_event != NULL && raw->event_done != NULL;
  if (recorded) {
    b->events = calloc((size_t)b->nuses, sizeof *b->events);
    recorded = b->events != NULL;
    for (int i = 0; recorded && i < b->nuses; i++) {
      b->events[i] = raw->record_event(raw->ctx, index, b->uses[i]);
      b->nevents = i + 1;
      recorded = b->events[i] != NULL;
    }
  }
  if (!recorded) {
    /* Without an event, only a whole-device synchronisation proves the other
     * streams are done with the block: slow, but never unsafe. */
    free_events(raw, index, b);
    if (raw->synchronize) raw->synchronize(raw->ctx, index);
    forget_uses(b);
    lt_return_block_locked(da, b);
    return;
  }
  b->pending = true;
  b->pending_next = da->pending;
  da->pending = b;
}

/* Whether every event of b has completed; with wait, blocks until they have. */
static bool events_done(const lt_raw_allocator *raw, int index, lt_block *b, bool wait) {
  for (int i = 0; i < b->nevents; i++) {
    if (!b->events[i]) continue;
    if (wait) {
      if (raw->event_wait) raw->event_wait(raw->ctx, index, b->events[i]);
    } else if (!raw->event_done(raw->ctx, index, b->events[i])) {
      return false;
    }
  }
  return true;
}

void lt_process_pending_locked(lt_device_allocator *da, bool wait) {
  lt_block **link = &da->pending;
  while (*link) {
    lt_block *b = *link;
    const lt_raw_allocator *raw = &b->segment->raw;
    if (!events_done(raw, da->dev.index, b, wait)) {
      link = &b->pending_next;
      continue;
    }
    *link = b->pending_next;
    free_events(raw, da->dev.index, b);
    forget_uses(b);
    b->pending = false;
    b->pending_next = NULL;
    lt_return_block_locked(da, b);
  }
}
