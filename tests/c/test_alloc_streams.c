/* The caching allocator's streams, on a fake device whose raw allocator has
 * streams and events that the test completes by hand: per-stream reuse (a
 * block freed on one stream is never handed to another), record_stream (a
 * block used on another stream waits for that stream's event before reuse),
 * and the exact statistics meanwhile (allocated drops at the free, active when
 * the block is back in its pool), as PyTorch's CUDACachingAllocator. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lt/alloc.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- the fake device ---- */

enum { MAX_EVENTS = 64 };

typedef struct fake_event {
  lt_stream_id stream;
  bool done, freed;
} fake_event;

typedef struct fake_device {
  lt_stream_id current;
  fake_event events[MAX_EVENTS];
  int nevents;
  bool fail_events; /* record_event answers NULL */
  int syncs;        /* whole-device synchronisations */
  int waits;        /* event_wait calls */
  int raw_allocs;
} fake_device;

static void *fake_alloc(void *ctx, int index, size_t nbytes) {
  (void)index;
  ((fake_device *)ctx)->raw_allocs++;
  return malloc(nbytes);
}

static void fake_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx, (void)index, (void)nbytes;
  free(ptr);
}

static lt_stream_id fake_current_stream(void *ctx, int index) {
  (void)index;
  return ((fake_device *)ctx)->current;
}

static void *fake_record_event(void *ctx, int index, lt_stream_id stream) {
  (void)index;
  fake_device *d = ctx;
  if (d->fail_events || d->nevents == MAX_EVENTS) return NULL;
  fake_event *e = &d->events[d->nevents++];
  *e = (fake_event){.stream = stream};
  return e;
}

static bool fake_event_done(void *ctx, int index, void *event) {
  (void)ctx, (void)index;
  return ((fake_event *)event)->done;
}

static void fake_event_wait(void *ctx, int index, void *event) {
  (void)index;
  ((fake_device *)ctx)->waits++;
  ((fake_event *)event)->done = true;
}

static void fake_event_free(void *ctx, int index, void *event) {
  (void)ctx, (void)index;
  ((fake_event *)event)->freed = true;
}

static void fake_synchronize(void *ctx, int index) {
  (void)index;
  fake_device *d = ctx;
  d->syncs++;
  for (int i = 0; i < d->nevents; i++) d->events[i].done = true;
}

/* Work on stream s reaches the point where its events were recorded. */
static void complete_stream(fake_device *d, lt_stream_id s) {
  for (int i = 0; i < d->nevents; i++)
    if (d->events[i].stream == s) d->events[i].done = true;
}

static const lt_device dev = {LT_DEVICE_CUDA, 2};

static fake_device *install(void) {
  static fake_device d;
  memset(&d, 0, sizeof d);
  lt_raw_allocator raw = {.alloc = fake_alloc,
                          .free = fake_free,
                          .current_stream = fake_current_stream,
                          .record_event = fake_record_event,
                          .event_done = fake_event_done,
                          .event_wait = fake_event_wait,
                          .event_free = fake_event_free,
                          .synchronize = fake_synchronize,
                          .ctx = &d};
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);
  return &d;
}

static void uninstall(void) {
  lt_empty_cache(dev);
  lt_memory_stats s;
  lt_memory_get_stats(dev, &s);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.active_bytes[LT_POOL_ALL].current, 0);
  lt_alloc_set_backend(LT_DEVICE_CUDA, NULL);
}

typedef struct held {
  void *ptr;
  lt_block *block;
} held;

static held must_alloc(size_t nbytes) {
  held h = {NULL, NULL};
  CHECK_EQ_INT(lt_alloc(dev, nbytes, LT_CAT_OTHER, &h.ptr, &h.block), LT_OK);
  return h;
}

static lt_memory_stats stats(void) {
  lt_memory_stats s;
  lt_memory_get_stats(dev, &s);
  return s;
}

/* ---- tests ---- */

static void test_blocks_carry_their_stream(void) {
  fake_device *d = install();
  d->current = 7;
  held a = must_alloc(1000);
  CHECK_EQ_INT(lt_block_stream(a.block), 7);
  d->current = 0;
  held b = must_alloc(1000);
  CHECK_EQ_INT(lt_block_stream(b.block), 0);
  /* Two streams, two small segments: a segment serves one stream only. */
  CHECK_EQ_INT(stats().segment[LT_POOL_ALL].current, 2);
  CHECK_EQ_INT(d->raw_allocs, 2);
  lt_free(a.block);
  lt_free(b.block);
  uninstall();
}

static void test_reuse_stays_on_the_stream(void) {
  fake_device *d = install();
  d->current = 5;
  held a = must_alloc(4 * MiB); /* a 20 MiB large segment for stream 5 */
  void *first = a.ptr;
  lt_free(a.block);

  /* Stream 9 does not get stream 5's free block, even though it fits. */
  d->current = 9;
  held b = must_alloc(4 * MiB);
  CHECK(b.ptr != first);
  CHECK_EQ_INT(lt_block_stream(b.block), 9);
  CHECK_EQ_INT(d->raw_allocs, 2);

  /* Stream 5 gets its own block back, without a new segment. */
  d->current = 5;
  held c = must_alloc(4 * MiB);
  CHECK(c.ptr == first);
  CHECK_EQ_INT(d->raw_allocs, 2);
  lt_free(b.block);
  lt_free(c.block);

  /* A small request takes the small pool, in a segment of its stream. */
  d->current = 9;
  held e = must_alloc(100);
  CHECK_EQ_INT(lt_block_stream(e.block), 9);
  CHECK_EQ_INT(d->raw_allocs, 3); /* small pool: its own 2 MiB segment */
  lt_free(e.block);
  uninstall();
}

static void test_record_stream_delays_reuse(void) {
  fake_device *d = install();
  d->current = 1;
  held a = must_alloc(3000); /* rounds to 3072 */
  /* Used on stream 2 and on its own stream 1 (which needs no event). */
  CHECK_EQ_INT(lt_block_record_stream(a.block, 2), LT_OK);
  CHECK_EQ_INT(lt_block_record_stream(a.block, 2), LT_OK); /* once is enough */
  CHECK_EQ_INT(lt_block_record_stream(a.block, 1), LT_OK);

  CHECK_EQ_INT(lt_free(a.block), 3072);
  CHECK_EQ_INT(d->nevents, 1); /* one event, on stream 2 */
  CHECK_EQ_INT(d->events[0].stream, 2);
  lt_memory_stats s = stats();
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.allocation[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.active_bytes[LT_POOL_ALL].current, 3072);
  CHECK_EQ_INT(s.active[LT_POOL_ALL].current, 1);
  /* A second free of the pending block changes nothing. */
  CHECK_EQ_INT(lt_free(a.block), 0);

  /* While stream 2 still works on it, stream 1 gets other bytes. */
  held b = must_alloc(3000);
  CHECK(b.ptr != a.ptr);
  CHECK(!d->events[0].freed);

  /* Stream 2 passes the event: the next allocation takes the block back. */
  complete_stream(d, 2);
  lt_free(b.block);
  held c = must_alloc(3000);
  CHECK(c.ptr == a.ptr); /* the lowest address of the merged free space */
  CHECK(d->events[0].freed);
  s = stats();
  CHECK_EQ_INT(s.active_bytes[LT_POOL_ALL].current, 3072);
  CHECK_EQ_INT(s.allocated_bytes[LT_POOL_ALL].current, 3072);
  lt_free(c.block);
  CHECK_EQ_INT(stats().active_bytes[LT_POOL_ALL].current, 0);
  uninstall();
}

static void test_empty_cache_waits_for_pending(void) {
  fake_device *d = install();
  d->current = 3;
  held a = must_alloc(MiB / 2);
  CHECK_EQ_INT(lt_block_record_stream(a.block, 4), LT_OK);
  CHECK_EQ_INT(lt_block_record_stream(a.block, 6), LT_OK);
  lt_free(a.block);
  CHECK_EQ_INT(d->nevents, 2);
  /* The segment can only go back once the block is back: empty_cache waits. */
  CHECK_EQ_INT(lt_empty_cache(dev), 2 * MiB);
  CHECK_EQ_INT(d->waits, 2);
  CHECK(d->events[0].freed && d->events[1].freed);
  lt_memory_stats s = stats();
  CHECK_EQ_INT(s.active_bytes[LT_POOL_ALL].current, 0);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 0);
  uninstall();
}

static void test_failed_event_synchronizes(void) {
  fake_device *d = install();
  d->current = 1;
  held a = must_alloc(2048);
  CHECK_EQ_INT(lt_block_record_stream(a.block, 2), LT_OK);
  d->fail_events = true;
  lt_free(a.block);
  /* No event to wait for: the device was synchronised and the block is free. */
  CHECK_EQ_INT(d->syncs, 1);
  CHECK_EQ_INT(stats().active_bytes[LT_POOL_ALL].current, 0);
  held b = must_alloc(2048);
  CHECK(b.ptr == a.ptr);
  lt_free(b.block);
  uninstall();
}

static void test_out_of_memory_path_waits_for_pending(void) {
  fake_device *d = install();
  lt_set_limit(dev, 20 * MiB);
  d->current = 1;
  held a = must_alloc(12 * MiB); /* a 12 MiB segment, the only one the limit allows */
  CHECK_EQ_INT(lt_block_record_stream(a.block, 2), LT_OK);
  lt_free(a.block);
  /* Stream 8 needs a segment; stream 1's cached one is pending and must be
   * waited for and released first. */
  d->current = 8;
  held b = must_alloc(12 * MiB);
  CHECK_EQ_INT(lt_block_stream(b.block), 8);
  CHECK_EQ_INT(d->waits, 1);
  lt_memory_stats s = stats();
  CHECK_EQ_INT(s.num_alloc_retries, 1);
  CHECK_EQ_INT(s.reserved_bytes[LT_POOL_ALL].current, 12 * MiB);
  lt_free(b.block);
  lt_set_limit(dev, 0);
  uninstall();
}

static void test_streamless_devices_are_unchanged(void) {
  /* The CPU has no stream hooks: every block is on stream 0, and recording a
   * stream on it makes its free wait for nothing it cannot know about, so
   * the allocator synchronises (a no-op here) and frees at once. */
  void *ptr;
  lt_block *block;
  CHECK_EQ_INT(lt_alloc(lt_cpu(), 1000, LT_CAT_OTHER, &ptr, &block), LT_OK);
  CHECK_EQ_INT(lt_block_stream(block), 0);
  CHECK_EQ_INT(lt_block_record_stream(block, 0), LT_OK);
  CHECK_EQ_INT(lt_block_record_stream(block, 3), LT_OK);
  lt_free(block);
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  CHECK_EQ_INT(s.active_bytes[LT_POOL_ALL].current, 0);
  /* Zero-byte blocks own no memory: nothing to record. */
  CHECK_EQ_INT(lt_alloc(lt_cpu(), 0, LT_CAT_OTHER, &ptr, &block), LT_OK);
  CHECK_EQ_INT(lt_block_record_stream(block, 3), LT_OK);
  CHECK_EQ_INT(lt_block_stream(block), 0);
  lt_free(block);
  CHECK_EQ_INT(lt_block_record_stream(NULL, 3), LT_OK);
  lt_empty_cache(lt_cpu());
}

int main(void) {
  test_blocks_carry_their_stream();
  test_reuse_stays_on_the_stream();
  test_record_stream_delays_reuse();
  test_empty_cache_waits_for_pending();
  test_failed_event_synchronizes();
  test_out_of_memory_path_waits_for_pending();
  test_streamless_devices_are_unchanged();
  return check_summary("test_alloc_streams");
}
