/* The memory history: a log of allocations, frees, category changes and
 * marks, kept while recording is on, for lt.memory.snapshot and the HTML
 * report (as PyTorch's torch.cuda.memory._record_memory_history).
 *
 * One log for the whole process rather than one per device: marks and times
 * then line up across devices, and each event names its device. The log is an
 * array that doubles when full, so appending costs no malloc per event. When
 * recording is off the allocator pays one predictable branch on a relaxed
 * atomic load (lt_history_is_on); everything here runs only when it is on.
 *
 * Lock order: a device's lock, then history_lock (lt_history_category is
 * called with the device's lock held); never the other way round. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/alloc_internal.h"

#define NDEVICE_TYPES LT_NDEVICE_TYPES

atomic_bool lt_history_on;

static pthread_mutex_t history_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_memory_event *events;
static size_t count, capacity, dropped;
static size_t max_events = LT_HISTORY_DEFAULT_MAX_EVENTS;
static int64_t start_ns;
/* Block ids only grow, across recordings too: a block whose id is below the
 * first id of this recording was logged by an earlier one (or never). */
static uint64_t next_id = 1, first_id = 1;

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool logged_now(const lt_block *b) { return b->history_id >= first_id; }

/* Depth of lt_memory_history_collecting on this thread: a collection on one
 * thread must not flag another thread's frees. */
static _Thread_local int collecting;

void lt_memory_history_collecting(bool on) { collecting += on ? 1 : (collecting > 0 ? -1 : 0); }

/* The segment's id in this log, given on its first event. history_lock is held. */
static uint64_t segment_id_locked(lt_segment *seg) {
  if (seg->history_id < first_id) seg->history_id = next_id++;
  return seg->history_id;
}

/* Appends one event; returns it, or NULL when the log is full (counted as
 * dropped) or memory for it could not be had. history_lock is held. */
static lt_memory_event *append_locked(lt_event_kind kind, lt_device dev) {
  if (count >= max_events) {
    dropped++;
    return NULL;
  }
  if (count == capacity) {
    size_t grown = capacity ? capacity * 2 : 4096;
    if (grown > max_events) grown = max_events;
    lt_memory_event *bigger = realloc(events, grown * sizeof *bigger);
    if (!bigger) {
      dropped++;
      return NULL;
    }
    events = bigger;
    capacity = grown;
  }
  lt_memory_event *e = &events[count++];
  memset(e, 0, sizeof *e);
  e->time_ns = monotonic_ns() - start_ns;
  e->kind = (unsigned char)kind;
  e->device = dev;
  return e;
}

/* An event for block b, giving it an id when it has none in this log. */
static lt_memory_event *append_block_locked(lt_event_kind kind, lt_block *b, lt_device dev) {
  lt_memory_event *e = append_locked(kind, dev);
  if (!e) return NULL;
  if (!logged_now(b)) b->history_id = next_id++;
  e->id = b->history_id;
  e->size = b->size;
  e->requested = b->requested;
  e->category = b->category;
  e->previous_category = b->category;
  e->origin = b->origin;
  e->op = b->op;
  if (b->segment) {
    e->segment = segment_id_locked(b->segment);
    e->offset = (size_t)(b->ptr - b->segment->base);
  }
  return e;
}

void lt_history_alloc(lt_block *b, lt_device dev) {
  pthread_mutex_lock(&history_lock);
  /* Already logged as existing: recording started between the allocation
   * and this call. */
  if (atomic_load(&lt_history_on) && !logged_now(b)) {
    lt_memory_event *e = append_block_locked(LT_EVENT_ALLOC, b, dev);
    if (e) b->history_event = (size_t)(e - events);
  }
  pthread_mutex_unlock(&history_lock);
}

void lt_history_free(lt_block *b) {
  pthread_mutex_lock(&history_lock);
  if (atomic_load(&lt_history_on)) {
    lt_memory_event *e = append_block_locked(LT_EVENT_FREE, b, b->segment->owner->dev);
    if (e && collecting > 0) e->flags = LT_EVENT_COLLECTED;
  }
  pthread_mutex_unlock(&history_lock);
}

void lt_history_category(lt_block *b, lt_category previous) {
  pthread_mutex_lock(&history_lock);
  if (atomic_load(&lt_history_on)) {
    lt_memory_event *e = append_block_locked(LT_EVENT_CATEGORY, b, b->segment->owner->dev);
    if (e) e->previous_category = (unsigned char)previous;
  }
  pthread_mutex_unlock(&history_lock);
}

void lt_history_origin(lt_block *b) {
  pthread_mutex_lock(&history_lock);
  size_t i = b->history_event;
  if (logged_now(b) && i < count && events[i].id == b->history_id) {
    events[i].origin = b->origin;
    events[i].op = b->op;
  }
  pthread_mutex_unlock(&history_lock);
}

static void append_segment_locked(lt_segment *seg, lt_event_kind kind) {
  lt_memory_event *e = append_locked(kind, seg->owner->dev);
  if (!e) return;
  e->id = e->segment = segment_id_locked(seg);
  e->size = seg->size;
}

void lt_history_segment(lt_segment *seg, bool alloc) {
  pthread_mutex_lock(&history_lock);
  if (atomic_load(&lt_history_on))
    append_segment_locked(seg, alloc ? LT_EVENT_SEGMENT_ALLOC : LT_EVENT_SEGMENT_FREE);
  pthread_mutex_unlock(&history_lock);
}

/* Logs every segment and live block of one device as existing, so that the
 * log starts from what is already reserved and allocated. */
static void log_existing_blocks(lt_device_allocator *da) {
  pthread_mutex_lock(&da->lock);
  pthread_mutex_lock(&history_lock);
  for (lt_segment *seg = da->segments; seg; seg = seg->next)
    if (seg->history_id < first_id) append_segment_locked(seg, LT_EVENT_SEGMENT_ALLOC);
  for (lt_block *b = da->live; b; b = b->live_next)
    if (!logged_now(b)) append_block_locked(LT_EVENT_EXISTING, b, da->dev);
  pthread_mutex_unlock(&history_lock);
  pthread_mutex_unlock(&da->lock);
}

/* The recording running now was started by lt_memory_history_start_default. */
static bool started_as_default;

lt_status lt_memory_history_start_default(void) {
  LT_TRY(lt_memory_history_start(0));
  pthread_mutex_lock(&history_lock);
  started_as_default = true;
  pthread_mutex_unlock(&history_lock);
  return LT_OK;
}

lt_status lt_memory_history_start(size_t limit) {
  if (limit == 0) limit = LT_HISTORY_DEFAULT_MAX_EVENTS;
  pthread_mutex_lock(&history_lock);
  bool was_on = atomic_load(&lt_history_on) && !started_as_default;
  started_as_default = false;
  if (was_on) {
    max_events = limit < count ? count : limit;
    pthread_mutex_unlock(&history_lock);
    return LT_OK;
  }
  max_events = limit;
  count = 0;
  dropped = 0;
  first_id = next_id;
  start_ns = monotonic_ns();
  atomic_store(&lt_history_on, true);
  pthread_mutex_unlock(&history_lock);

  for (int t = 0; t < NDEVICE_TYPES; t++) {
    for (int i = 0; i < LT_MAX_DEVICES; i++) {
      lt_device dev = {(signed char)t, (signed char)i};
      lt_device_allocator *da = lt_device_allocator_of(dev);
      if (da) log_existing_blocks(da);
    }
  }
  return LT_OK;
}

void lt_memory_history_stop(void) {
  pthread_mutex_lock(&history_lock);
  atomic_store(&lt_history_on, false);
  started_as_default = false;
  pthread_mutex_unlock(&history_lock);
}

void lt_memory_history_clear(void) {
  pthread_mutex_lock(&history_lock);
  atomic_store(&lt_history_on, false);
  started_as_default = false;
  free(events);
  events = NULL;
  count = capacity = dropped = 0;
  first_id = next_id; /* blocks of the dropped log are no longer in one */
  pthread_mutex_unlock(&history_lock);
}

bool lt_memory_history_recording(void) { return atomic_load(&lt_history_on); }

void lt_memory_mark(const char *label) {
  pthread_mutex_lock(&history_lock);
  if (atomic_load(&lt_history_on)) {
    lt_memory_event *e = append_locked(LT_EVENT_MARK, lt_cpu());
    if (e) e->origin = label;
  }
  pthread_mutex_unlock(&history_lock);
}

void lt_memory_history_get_info(lt_memory_history_info *out) {
  pthread_mutex_lock(&history_lock);
  out->recording = atomic_load(&lt_history_on);
  out->count = count;
  out->dropped = dropped;
  out->max_events = max_events;
  pthread_mutex_unlock(&history_lock);
}

size_t lt_memory_history_read(size_t first, lt_memory_event *out, size_t n) {
  pthread_mutex_lock(&history_lock);
  size_t copied = 0;
  if (first < count) {
    copied = count - first < n ? count - first : n;
    memcpy(out, events + first, copied * sizeof *out);
  }
  pthread_mutex_unlock(&history_lock);
  return copied;
}
